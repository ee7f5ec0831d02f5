import { afterEach, describe, expect, it } from 'vitest'
import { RECALL_TOOL_DEFINITION } from '../../src/proxy/recall-tool.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'

/**
 * Messages written by hand, as text, the way clients write what JSON.parse does not give back: integers
 * past 2^53, a number past a double's range, -0, 1.0, exponents, escapes where none are needed, and
 * spacing of their own. The test knows each message's text because it wrote it; the service must hand
 * back (and forward) that text, not a re-serialization.
 */
const toolUse = (id: string, n: number): string =>
  `{ "role":"assistant" ,"content":[{"type":"tool_use","id":"${id}","name":"bash","input":{"command":"ls part_${n}","seed":12345678901234567890123,"limit":1e400,"zero":-0,"ratio":1.0,"big":2E+3}}]}`
const toolResult = (id: string, n: number): string =>
  `{"role":"user","content":[ {"type":"tool_result","tool_use_id":"${id}","content":"caf\\u00e9 ${'x'.repeat(1_200)} ${n}"} ]}`

function history(steps: number): string[] {
  const messages = [`{"role":"user","content":"Port the parser to the new API"}`]
  for (let i = 0; i < steps; i++) messages.push(toolUse(`toolu_f${i}`, i), toolResult(`toolu_f${i}`, i))
  messages.push(`{"role":"assistant","content":"Ported  \\/ all parts."}`, `{"role" : "user", "content" : "now run the tests"}`)
  return messages
}

const apps: App[] = []
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close()
})

describe("the client's own messages", () => {
  it.each([
    ['inline', { COMPACT_WORKERS: '0' }],
    ['in a worker', { COMPACT_WORKERS: '1', COMPACT_WORKER_MIN_KB: '0' }]
  ])('come back from /v1/compact as the bytes they were sent as (%s)', async (_path, env) => {
    const app = await testApp(env)
    apps.push(app)
    const messages = history(30)
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'content-type': 'application/json' },
      payload: `{"mode":"manual","keep_tokens":3000,"messages":[${messages.join(', ')}]}`
    })
    expect(res.statusCode, res.body).toBe(200)
    const body = res.json<{ messages: unknown[]; clips: unknown[]; stats: { kept_messages: number } }>()
    expect(body.clips).toEqual([])
    const kept = messages.slice(messages.length - (body.messages.length - 1))
    expect(kept.length).toBeGreaterThan(4)
    expect(res.body).toContain(`${kept.join(',')}]`)
  })

  it('are forwarded by the proxy as they were sent, with every other field of the body', async () => {
    const fake = await new FakeAnthropic().start()
    try {
      const app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-fidelity-000000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_PRECOMPUTE_AT: 'off' })
      apps.push(app)
      fake.fallback = (r) =>
        (r.body.tools ?? []).some((t) => t.name === 'record_summary') ? { toolInput: { objective: 'port the parser' } } : { text: 'done' }
      const messages = history(40)
      const res = await app.inject({
        method: 'POST',
        url: '/v1/messages',
        headers: { 'content-type': 'application/json', 'x-compaction-budget': '6000' },
        payload: `{"model":"claude-test","max_tokens":1e400,"temperature":1.0,"messages":[${messages.join(',')}],"metadata":{"user_id":"fidelity"}}`
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.headers['x-compaction']).toBe('compacted')
      const forwarded = fake.requests.filter((r) => !(r.body.tools ?? []).some((t) => t.name === 'record_summary')).at(-1)!
      expect(forwarded.raw.startsWith('{"model":"claude-test","max_tokens":1e400,"temperature":1.0,"messages":[')).toBe(true)
      // the gateway's recall tool after the body's last field, said in the answer's headers
      expect(forwarded.raw.endsWith(`],"metadata":{"user_id":"fidelity"},"tools":[${JSON.stringify(RECALL_TOOL_DEFINITION)}]}`)).toBe(true)
      expect(res.headers['x-compaction-recall-tool']).toBe('gateway_recall')
      const sent = forwarded.body.messages.length
      const kept = messages.slice(messages.length - (sent - 2)) // the summary turn and its reply go first
      expect(kept.length).toBeGreaterThan(4)
      expect(forwarded.raw).toContain(`${kept.join(',')}]`)
    } finally {
      await fake.close()
    }
  })

  it.each([
    ['inline', { COMPACT_WORKERS: '0' }],
    ['in a worker', { COMPACT_WORKERS: '1', COMPACT_WORKER_MIN_KB: '0' }]
  ])('a budget of 1e400 is refused the same way (%s)', async (_path, env) => {
    const app = await testApp(env)
    apps.push(app)
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'content-type': 'application/json' },
      payload: '{"budget_tokens":1e400,"messages":[{"role":"user","content":"hi"}]}'
    })
    expect(res.statusCode).toBe(400)
    expect(res.json<{ error: { path: string } }>().error.path).toBe('/budget_tokens')
  })
})
