import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { RECALL_TOOL_DEFINITION } from '../../src/proxy/recall-tool.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'

/**
 * Generated histories, written as JSON text by the test itself (so it knows every message's bytes), sent
 * to /v1/compact inline and in a worker, without a model, and through the proxy (/v1/messages and
 * count_tokens) with one. The oracle knows nothing of the code: every answer is a 4xx in the one error
 * shape or a 200 whose context is within its budget, holds no unpaired surrogate the client did not
 * send, and carries every message the client sent and no clip names as the very bytes it was sent as.
 */

/** Number literals JSON.parse does not give back as written. */
const ODD_NUMBERS = ['12345678901234567890123', '1e400', '-0', '1.0', '2E+3', '0.1000000000000000055511151231257827', '-1e-400']

/** Texts that reach what users send: emoji and other astral characters where clips fall, NULs, long runs. */
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 60 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 400 }) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('😀', '𝄞', '\u0000', 'é', '\u2028'), fc.integer({ min: 1, max: 6_000 })).map(([c, n]) => c.repeat(n)) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.string({ maxLength: 20 }), fc.integer({ min: 1_000, max: 60_000 })).map(([s, n]) => `${s}${'line of output\n'.repeat(n / 15)}😀`)
  }
)

/** JSON for a value, with spacing of the writer's own choosing and odd numbers as raw literals. */
function write(value: unknown, spaced: boolean, numbers: string[]): string {
  let json = spaced ? JSON.stringify(value, null, 1) : JSON.stringify(value)
  json = json.replace(/"__n(\d)__"/g, (_m, k: string) => ODD_NUMBERS[Number(k)]!)
  numbers.push(...[...json.matchAll(/-?\d[\d.eE+-]*/g)].map((m) => m[0]))
  return json
}

interface Step {
  kind: 'tool' | 'text' | 'prompt'
  body: string
  extra: number
}
const step = fc.record({ kind: fc.constantFrom<Step['kind']>('tool', 'tool', 'text', 'prompt'), body: text, extra: fc.integer({ min: 0, max: 6 }) })

/** A valid history as message texts (user first, pairs whole), from generated steps. */
function history(steps: Step[], spaced: boolean): string[] {
  const numbers: string[] = []
  const out = [write({ role: 'user', content: 'work on the task' }, spaced, numbers)]
  let last = 'user' as 'user' | 'assistant'
  steps.forEach((s, i) => {
    if (s.kind === 'tool') {
      if (last === 'assistant') out.push(write({ role: 'user', content: 'go on' }, spaced, numbers))
      out.push(
        write(
          {
            role: 'assistant',
            content: [{ type: 'tool_use', id: `toolu_${i}`, name: 'bash', input: { command: s.body.slice(0, 200), n: `__n${s.extra}__` } }]
          },
          spaced,
          numbers
        )
      )
      out.push(write({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${i}`, content: s.body }] }, spaced, numbers))
      last = 'user'
    } else if (s.kind === 'text') {
      out.push(write({ role: last === 'user' ? 'assistant' : 'user', content: s.body || 'ok' }, spaced, numbers))
      last = last === 'user' ? 'assistant' : 'user'
    } else {
      if (last === 'user') out.push(write({ role: 'assistant', content: 'done' }, spaced, numbers))
      out.push(write({ role: 'user', content: [{ type: 'text', text: s.body || 'next' }] }, spaced, numbers))
      last = 'user'
    }
  })
  if (last === 'assistant') out.push(write({ role: 'user', content: 'continue' }, spaced, numbers))
  return out
}

const body = fc.record({
  steps: fc.array(step, { minLength: 1, maxLength: 40 }),
  spaced: fc.boolean(),
  budget: fc.oneof(fc.constant(undefined), fc.integer({ min: 1_000, max: 40_000 })),
  keep: fc.oneof(fc.constant(undefined), fc.integer({ min: 100, max: 20_000 })),
  usage: fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 2_000_000 })),
  mode: fc.constantFrom('auto', 'manual')
})
type Body = fc.Arbitrary<typeof body extends fc.Arbitrary<infer T> ? T : never>

/** Whether a string holds a surrogate without its pair. */
function loneSurrogate(s: string): boolean {
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s)
}

/** Every string in a JSON value. */
function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value)
  else if (Array.isArray(value)) for (const v of value) strings(v, out)
  else if (value && typeof value === 'object') for (const v of Object.values(value)) strings(v, out)
  return out
}

function expectErrorShape(status: number, text: string): void {
  expect(status, text.slice(0, 300)).toBeGreaterThanOrEqual(400)
  expect(status, text.slice(0, 300)).toBeLessThan(500)
  const error = JSON.parse(text) as { type: string; error: { type: string; message: string } }
  expect(error.type).toBe('error')
  expect(typeof error.error.type).toBe('string')
  expect(error.error.message.length).toBeGreaterThan(0)
}

/** The oracle of a /v1/compact answer to `messages`. */
function checkCompact(status: number, text: string, messages: string[], budget: number | undefined, clientHadLone: boolean): void {
  if (status !== 200) return expectErrorShape(status, text)
  const res = JSON.parse(text) as {
    compacted: boolean
    kept_from: number
    messages?: unknown[]
    clips: { message_index: number }[]
    stats: { context_after_compaction: number }
  }
  if (budget !== undefined && res.compacted) expect(res.stats.context_after_compaction).toBeLessThanOrEqual(budget)
  if (!clientHadLone) expect(strings(JSON.parse(text)).some(loneSurrogate)).toBe(false)
  if (!res.messages) return // not compacted: the client's history stands as it is
  const clipped = new Set(res.clips.map((c) => c.message_index))
  for (let i = res.kept_from; i < messages.length; i++) {
    if (clipped.has(i)) continue
    const sent = JSON.parse(messages[i]!) as { role: string; content: unknown }
    if (i === res.kept_from && sent.role === 'user') {
      // a kept prompt follows the summary turn in the one user message (roles alternate): its blocks close it
      const blocks = typeof sent.content === 'string' ? [{ type: 'text', text: sent.content }] : (sent.content as unknown[])
      const first = res.messages[0] as { content: unknown[] }
      expect(first.content.slice(first.content.length - blocks.length)).toEqual(blocks)
      continue
    }
    expect(text.includes(messages[i]!), `message ${i} not as sent`).toBe(true)
  }
}

const RUNS = Number(process.env.FUZZ_RUNS ?? 800)

describe('fuzzed histories', () => {
  let inline: App
  let worker: App
  let proxy: App
  let proxyWorkers: App
  let fake: FakeAnthropic
  beforeAll(async () => {
    inline = await testApp({ COMPACT_WORKERS: '0', COMPACT_RATE_LIMIT_PER_MIN: '1000000' })
    worker = await testApp({ COMPACT_WORKERS: '1', COMPACT_WORKER_MIN_KB: '0', COMPACT_RATE_LIMIT_PER_MIN: '1000000' })
    fake = await new FakeAnthropic().start()
    fake.fallback = (r) =>
      (r.body.tools ?? []).some((t) => t.name === 'record_summary') ? { toolInput: { objective: 'the task', next_steps: ['go on 😀'] } } : { text: 'ok' }
    proxy = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-fuzz-000000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_PRECOMPUTE_AT: 'off',
      COMPACT_RATE_LIMIT_PER_MIN: '1000000'
    })
    // no model: the crossings' compactions go to a worker, every one of them (COMPACT_WORKER_MIN_KB 0)
    proxyWorkers = await testApp({
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_PRECOMPUTE_AT: 'off',
      COMPACT_WORKERS: '1',
      COMPACT_WORKER_MIN_KB: '0',
      COMPACT_RATE_LIMIT_PER_MIN: '1000000'
    })
  })
  afterAll(async () => {
    await Promise.all([inline.close(), worker.close(), proxy.close(), proxyWorkers.close()])
    await fake.close()
  })

  it(`/v1/compact, inline and in a worker: ${RUNS} bodies each, the client's messages back as sent, the bound kept`, async () => {
    await fc.assert(
      fc.asyncProperty(body as Body, async (b) => {
        const messages = history(b.steps, b.spaced)
        const fields = [
          `"mode":"${b.mode}"`,
          ...(b.budget ? [`"budget_tokens":${b.budget}`] : []),
          ...(b.keep ? [`"keep_tokens":${b.keep}`] : []),
          ...(b.usage ? [`"usage":{"input_tokens":${b.usage}}`] : [])
        ]
        const payload = `{${fields.join(',')},"messages":[${messages.join(',')}]}`
        const lone = loneSurrogate(payload)
        for (const app of [inline, worker]) {
          const res = await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'content-type': 'application/json' }, payload })
          checkCompact(res.statusCode, res.body, messages, b.budget, lone)
        }
      }),
      { numRuns: RUNS }
    )
  }, 300_000)

  it(`/v1/messages and count_tokens, with a model and with the crossings in a worker: ${RUNS} bodies, forwarded with the client's messages as sent`, async () => {
    const pool = proxyWorkers.compaction.pool
    if (!pool) throw new Error('the app has no workers')
    const inWorker = vi.spyOn(pool, 'runProxied')
    // summaries made by a worker: every new summary of the app with workers must have come from one
    const summaries = new Set<string>()
    await fc.assert(
      fc.asyncProperty(body as Body, fc.boolean(), fc.boolean(), async (b, count, workers) => {
        const messages = history(b.steps, b.spaced)
        const payload = `{"model":"claude-fuzz","max_tokens":1e400,"messages":[${messages.join(',')}],"metadata":{"user_id":"fuzz"}}`
        const before = fake.requests.length
        const callsBefore = inWorker.mock.calls.length
        const res = await (workers ? proxyWorkers : proxy).inject({
          method: 'POST',
          url: count ? '/v1/messages/count_tokens' : '/v1/messages',
          headers: { 'content-type': 'application/json', 'x-compaction-budget': String(b.budget ?? 'off') },
          payload
        })
        if (res.statusCode !== 200) return expectErrorShape(res.statusCode, res.body)
        const summaryId = res.headers['x-compaction-summary-id']
        if (workers && typeof summaryId === 'string' && !summaries.has(summaryId)) {
          expect(inWorker.mock.calls.length, `summary ${summaryId} made without the worker pool`).toBeGreaterThan(callsBefore)
          summaries.add(summaryId)
        }
        const forwarded = fake.requests.slice(before).filter((r) => !(r.body.tools ?? []).some((t) => t.name === 'record_summary'))
        expect(forwarded).toHaveLength(1)
        const raw = forwarded[0]!.raw
        expect(raw.startsWith('{"model":"claude-fuzz","max_tokens":1e400,"messages":[')).toBe(true)
        if (!loneSurrogate(payload)) expect(strings(forwarded[0]!.body).some(loneSurrogate)).toBe(false)
        // every byte but the messages as the client sent them (and the gateway's recall tool after them where it
        // says it added it); the whole body when nothing was done
        const tool = res.headers['x-compaction-recall-tool'] === 'gateway_recall'
        const end = tool ? `],"metadata":{"user_id":"fuzz"},"tools":[${JSON.stringify(RECALL_TOOL_DEFINITION)}]}` : '],"metadata":{"user_id":"fuzz"}}'
        if (res.headers['x-compaction'] === 'none' && !tool) expect(raw).toBe(payload)
        else expect(raw.endsWith(end)).toBe(true)
      }),
      { numRuns: RUNS }
    )
    // the generated bodies reached the workers: crossings were compacted there (how many depends on the run's seed)
    expect(summaries.size).toBeGreaterThan(0)
  }, 300_000)
})
