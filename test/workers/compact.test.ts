import { describe, expect, it } from 'vitest'
import { testApp } from '../helpers/app.js'
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
