import { describe, expect, it } from 'vitest'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { assistant, call, user } from '../helpers/history.js'

const transcript = loadTranscripts(FIXTURE_DIR)[0]!
const withoutId = (body: string) => JSON.parse(body.replace(/cmp_[0-9a-f]{32}/g, 'cmp_ID').replace(/"duration_ms":[0-9.]+/g, '"duration_ms":0')) as unknown

describe('compactions in workers', () => {
  it('answer exactly what the inline path answers, and the errors in the same shape and places', async () => {
    const inline = await testApp({ COMPACT_WORKERS: '0' })
    const worker = await testApp({ COMPACT_WORKERS: '2', COMPACT_WORKER_MIN_KB: '0' })
    expect(worker.compaction.pool).toBeDefined()
    const bodies: unknown[] = [
      { mode: 'manual', session_id: 'w', messages: transcript.messages },
      { messages: transcript.messages, budget_tokens: 'off' },
      { messages: [user('a')], extra: 1 },
      { messages: [user('x'), assistant(call('a', 'bash', { command: 'ls' })), user('y')] },
      { messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] },
      { mode: 'manual', summarizer: 'anthropic', messages: [user('a'), assistant('b'), user('c')] }
    ]
    for (const body of [...bodies.map((b) => JSON.stringify(b)), '{"messages": [', '{"messages":[{"role":"user","content":"x"}],"\\u005f_proto__":{}}']) {
      const [a, b] = await Promise.all(
        [inline, worker].map((app) => app.inject({ method: 'POST', url: '/v1/compact', headers: { 'content-type': 'application/json' }, payload: body }))
      )
      expect(b!.statusCode, body.slice(0, 80)).toBe(a!.statusCode)
      expect(withoutId(b!.body)).toEqual(withoutId(a!.body))
    }
    // the worker's compaction is recorded, with its cold layer
    const records = await worker.inject({ url: '/v1/sessions/w/compactions' })
    expect(records.json().compactions).toHaveLength(1)
    const recall = await worker.inject({ method: 'POST', url: '/v1/sessions/w/recall', payload: { query: transcript.messages.length > 0 ? 'test' : 'x' } })
    expect(recall.statusCode).toBe(200)
    await inline.close()
    await worker.close()
  })
})

describe('compactions in workers with a model', () => {
  const SECRET = 'hunter2-correct-horse-battery'
  const body = JSON.stringify({
    mode: 'manual',
    session_id: 'wm',
    // the secret early, where the span the model reads holds it
    messages: [user(`Hello! the staging login: password=${SECRET} (keep it out of notes)`), ...transcript.messages.slice(1)]
  })
  const post = (app: Awaited<ReturnType<typeof testApp>>, payload = body) =>
    app.inject({ method: 'POST', url: '/v1/compact', headers: { 'content-type': 'application/json' }, payload })

  it('ask the model from the main thread for the summary, with the very request the inline path makes, the span redacted in the worker', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { toolInput: { objective: 'Fix the failing test (by the model)' } }
    const env = { ANTHROPIC_API_KEY: 'sk-ant-worker-model-000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_CACHE_TTL_S: '0' }
    const inline = await testApp({ ...env, COMPACT_WORKERS: '0' })
    const worker = await testApp({ ...env, COMPACT_WORKERS: '1', COMPACT_WORKER_MIN_KB: '0' })
    try {
      const a = await post(inline)
      const asked = fake.requests.map((r) => r.body)
      const b = await post(worker)
      expect(b.statusCode).toBe(200)
      expect(b.json().summarizer).toMatchObject({ kind: 'anthropic', calls: 1 })
      expect(b.json().summary.sections.objective).toBe('Fix the failing test (by the model)')
      expect(withoutId(b.body)).toEqual(withoutId(a.body))
      // the worker's model call is the inline one's, word for word: the same rendering, the same redaction
      expect(fake.requests.slice(asked.length).map((r) => r.body)).toEqual(asked)
      expect(JSON.stringify(asked)).not.toContain(SECRET)
      expect(JSON.stringify(asked)).toContain('[REDACTED:secret]')
      expect((await worker.inject({ url: '/v1/sessions/wm/compactions' })).json().compactions).toHaveLength(1)
    } finally {
      await inline.close()
      await worker.close()
      await fake.close()
    }
  })

  it("answer the model's faults as the inline path does: a fallback where it fails, a 503 with Retry-After where its places are full", async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { status: 500 }
    const worker = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-worker-model-000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_WORKERS: '1',
      COMPACT_WORKER_MIN_KB: '0',
      COMPACT_MAX_SUMMARIES: '1',
      COMPACT_SUMMARY_QUEUE: '1',
      COMPACT_CACHE_TTL_S: '0'
    })
    try {
      const failed = await post(worker)
      expect(failed.statusCode).toBe(200)
      expect(failed.json().summarizer).toMatchObject({ kind: 'extractive', fallback_reason: expect.any(String) })
      // one summary at a time and one waiting: a third while the first waits on the model is refused as overload
      // (three histories: identical ones would share one call)
      // (the model answers once the third has been turned away)
      let release = (): void => undefined
      const held = new Promise<void>((resolve) => (release = resolve))
      fake.fallback = { after: held, toolInput: { objective: 'slow' } }
      const sent = ['one', 'two', 'three'].map((n) => post(worker, body.replace('Hello!', `Hello ${n}!`)))
      const turnedAway = await Promise.race(sent)
      expect(turnedAway.statusCode).toBe(503)
      expect(Number(turnedAway.headers['retry-after'])).toBeGreaterThan(0)
      expect(turnedAway.json().error.type).toBe('overloaded_error')
      release()
      const results = await Promise.all(sent)
      expect(results.map((r) => r.statusCode).sort()).toEqual([200, 200, 503])
      expect(results.filter((r) => r.statusCode === 200).map((r) => r.json().summarizer.kind)).toEqual(['anthropic', 'anthropic'])
    } finally {
      await worker.close()
      await fake.close()
    }
  })
})
