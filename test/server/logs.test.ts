import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { buildApp } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'
import { assistant, call, result, results, user } from '../helpers/history.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { capturedLog } from '../helpers/app.js'

describe('logs', () => {
  it('carry one context_compacted event with the figures, and neither message content nor keys', async () => {
    const lines: string[] = []
    const stream = new PassThrough()
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)))
    const key = 'ck_live_7c1e0b9a3f5d4e2a8b6c'
    const app = await buildApp({ config: loadConfig({ COMPACT_API_KEYS: `acme=${key}`, LOG_LEVEL: 'debug' }), logStream: stream })
    const marker = 'MARKER-4f1c9e-never-in-logs'
    const messages = [
      user(`please ${marker}`),
      assistant(call('a', 'bash', { command: `echo ${marker}` })),
      results(result('a', marker)),
      assistant(marker),
      user(`again ${marker}`)
    ]
    for (const headers of [{ authorization: `Bearer ${key}` }, { 'x-api-key': key }]) {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/compact',
        headers: { ...headers, cookie: `session=${key}` },
        payload: { messages, mode: 'manual', session_id: 'sess-logs-1', instructions: marker }
      })
      expect(res.statusCode).toBe(200)
    }
    // a failing request logs too, and still not the content
    await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'x-api-key': key },
      payload: { messages: [user(marker), assistant(call('z', 'x', {})), user(marker)] }
    })
    await app.close()
    await new Promise((r) => setImmediate(r))

    const all = lines.join('\n')
    expect(all).not.toContain(marker)
    expect(all).not.toContain(key)
    const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === 'context_compacted')
    expect(events).toHaveLength(2)
    expect(events[0]).toMatchObject({
      session_id: 'sess-logs-1',
      key_name: 'acme',
      summarizer: 'extractive',
      reason: 'manual',
      duration_ms: expect.any(Number),
      raw_history_tokens: expect.any(Number),
      context_after_compaction: expect.any(Number),
      reqId: expect.any(String)
    })
    // every line is JSON with a request id where a request is involved
    for (const l of lines) expect(() => JSON.parse(l)).not.toThrow()
  })

  it("write one line a request, when it is answered, naming the request and its status, with the query's values left out", async () => {
    const { stream, lines } = capturedLog()
    const app = await buildApp({ config: loadConfig({}), logStream: stream })
    await app.inject({ method: 'GET', url: '/v1/doctrine?probe=kubelet' })
    await app.inject({ method: 'GET', url: '/no-such-route' })
    await app.close()
    await new Promise((r) => setImmediate(r))

    const requests = lines.filter((l) => l.req !== undefined)
    expect(requests.map((l) => [l.msg, (l.req as { url: string }).url, (l.res as { statusCode: number }).statusCode])).toEqual([
      ['request completed', '/v1/doctrine?probe=…', 200],
      ['request completed', '/no-such-route', 404]
    ])
    expect(requests.every((l) => typeof l.responseTime === 'number' && typeof l.reqId === 'string')).toBe(true)
    expect(lines.some((l) => l.msg === 'incoming request')).toBe(false)
  })

  it("write one line for a proxied request, with the upstream's status and timings on it", async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'ok' }
    const { stream, lines } = capturedLog()
    const app = await buildApp({ config: loadConfig({ ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'sk-ant-logs' }), logStream: stream })
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/messages?beta=true',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-claude-code-session-id': 'sess-log-line' },
        payload: { model: 'm', max_tokens: 10, messages: [user('hello there')] }
      })
      expect(res.statusCode).toBe(200)
    } finally {
      await app.close()
      await fake.close()
    }
    await new Promise((r) => setImmediate(r))
    const requests = lines.filter((l) => l.req !== undefined)
    expect(requests).toHaveLength(1)
    expect(requests[0]).toMatchObject({
      msg: 'request completed',
      event: 'proxied',
      endpoint: 'messages',
      status: 200,
      compaction: 'none',
      res: { statusCode: 200 },
      req: { url: '/v1/messages?beta=…' }
    })
    expect(requests[0]!.upstream_ms).toEqual(expect.any(Number))
    expect(requests[0]!.prepare_ms).toEqual(expect.any(Number))
    expect(lines.filter((l) => l.msg === 'proxied')).toEqual([])
  })
})
