import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
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
      const [a, b] = await Promise.all([inline, worker].map((app) => app.inject({ method: 'POST', url: '/v1/compact', headers: { 'content-type': 'application/json' }, payload: body })))
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

  it('turn a body away with 503 and Retry-After, unread, while the bytes in flight are at the bound', async () => {
    const app = await testApp({ COMPACT_MAX_INFLIGHT_MB: '1' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    // a client that announces 900 KB and is slow to send it holds its reservation
    const slow = connect(port, '127.0.0.1')
    await new Promise((r) => slow.once('connect', r))
    slow.write(`POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${900 * 1024}\r\n\r\n{`)
    await new Promise((r) => setTimeout(r, 100))
    const big: Message[] = [user('x'.repeat(300 * 1024))]
    const res = await fetch(`http://127.0.0.1:${port}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: big }) })
    expect(res.status).toBe(503)
    expect(res.headers.get('retry-after')).toBe('5')
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('COMPACT_MAX_INFLIGHT_MB')
    // small requests still pass, and once the slow client is gone its bytes are given back
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200)
    slow.destroy()
    await new Promise((r) => setTimeout(r, 200))
    const after = await fetch(`http://127.0.0.1:${port}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: big }) })
    expect(after.status).toBe(200)
    await app.close()
  })
})
