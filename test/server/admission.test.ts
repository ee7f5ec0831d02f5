import { type Socket, connect } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { startServer } from '../helpers/process.js'
import { until } from '../helpers/wait.js'

const MiB = 1024 * 1024
const opened: { close: () => unknown }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function listening(env: Record<string, string>): Promise<{ app: App; port: number; url: string }> {
  const app = await testApp(env)
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const port = (app.server.address() as { port: number }).port
  return { app, port, url: `http://127.0.0.1:${port}` }
}

/** A raw client that announces a body of `declared` bytes and sends only `sent` of them, then waits. */
async function slowSender(port: number, declared: number, sent: number, path = '/v1/compact'): Promise<Socket> {
  const socket = connect(port, '127.0.0.1')
  await new Promise((r) => socket.once('connect', r))
  socket.on('error', () => undefined)
  opened.push({ close: () => socket.destroy() })
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`)
  if (sent > 0) await new Promise<void>((r) => socket.write(Buffer.alloc(sent, 0x20), () => r()))
  return socket
}

/** A history of about `bytes` bytes, valid for /v1/compact. */
function historyOf(bytes: number): string {
  return JSON.stringify({ mode: 'manual', messages: [user('x'.repeat(bytes)), assistant('ok'), user('go on')] })
}

describe('bytes in flight', () => {
  it('are counted as they arrive: senders that announce 30 MiB and send a byte do not hold the bound', async () => {
    const { port, url } = await listening({ COMPACT_MAX_INFLIGHT_MB: '4', COMPACT_WORKERS: '0' })
    for (let i = 0; i < 8; i++) await slowSender(port, 30 * MiB, 1)
    const res = await fetch(`${url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: historyOf(1 * MiB) })
    expect(res.status).toBe(200)
  })

  it('past the bound, a body is answered 503 with Retry-After that the sender reads whole, not a broken pipe', async () => {
    const { port, url } = await listening({ COMPACT_MAX_INFLIGHT_MB: '2', COMPACT_WORKERS: '0' })
    // another request holds 1.5 MiB it really sent
    await slowSender(port, 2 * MiB, 1.5 * MiB)
    const body = historyOf(24 * MiB)
    const results = await Promise.all(
      Array.from({ length: 16 }, async () => {
        const res = await fetch(`${url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        return { status: res.status, retryAfter: res.headers.get('retry-after'), type: ((await res.json()) as { error: { type: string } }).error.type }
      })
    )
    expect(results).toEqual(Array.from({ length: 16 }, () => ({ status: 503, retryAfter: '5', type: 'overloaded_error' })))
  })

  it('once at the bound, a request is refused before its body is read, and the bytes come back when the holder goes', async () => {
    const { port, url } = await listening({ COMPACT_MAX_INFLIGHT_MB: '1', COMPACT_WORKERS: '0' })
    const holder = await slowSender(port, 2 * MiB, 1.2 * MiB)
    const small = async (): Promise<number> =>
      (await fetch(`${url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: historyOf(100) })).status
    // (the holder's bytes are counted once the server has read them)
    await until('a small compaction is turned away with 503', async () => (await small()) === 503)
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    holder.destroy()
    await until('a small compaction is answered 200', async () => (await small()) === 200)
  })
})

/** A raw client sending `body` in the parts it is told to, and the status its answer comes with. */
async function partSender(port: number, body: Buffer): Promise<{ send: (from: number, to: number) => Promise<void>; status: Promise<number> }> {
  const socket = connect(port, '127.0.0.1')
  await new Promise((r) => socket.once('connect', r))
  socket.on('error', () => undefined)
  opened.push({ close: () => socket.destroy() })
  let answer = ''
  const status = new Promise<number>((resolve) => {
    socket.on('data', (d: Buffer) => {
      answer += d.toString('latin1')
      const m = /^HTTP\/1\.1 (\d{3})/.exec(answer)
      if (m) resolve(Number(m[1]))
    })
  })
  socket.write(`POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
  return { send: (from, to) => new Promise<void>((r) => socket.write(body.subarray(from, to), () => r())), status }
}

describe('bodies arriving together past the bound', () => {
  it('let the oldest through: the younger one is refused, not both with part of each read', async () => {
    const { port, url } = await listening({ COMPACT_MAX_INFLIGHT_MB: '1', COMPACT_WORKERS: '0' })
    const roundTrip = async (): Promise<void> => void (await (await fetch(`${url}/healthz`)).arrayBuffer())
    const body = Buffer.from(historyOf(0.9 * MiB))
    const older = await partSender(port, body)
    const younger = await partSender(port, body)
    await older.send(0, 0.6 * MiB)
    await roundTrip() // the server has read what was sent before it answered another request
    await younger.send(0, 0.6 * MiB) // its bytes reach the bound: it holds part of them
    await roundTrip()
    await older.send(0.6 * MiB, body.length) // the older body's rest, the younger's bytes still held
    expect(await older.status).toBe(200)
    // the younger goes on sending, as a client does: its rest is read and dropped, and it reads its refusal
    await younger.send(0.6 * MiB, body.length)
    expect(await younger.status).toBe(503)
  })
})

describe('a burst of large bodies at the server process', () => {
  it('gets 200 or a 503 with Retry-After that every sender reads: no broken pipe', async () => {
    const server = await startServer({ COMPACT_MAX_INFLIGHT_MB: '64' })
    try {
      const body = historyOf(24 * MiB)
      const outcomes = await Promise.all(
        Array.from({ length: 16 }, async () => {
          try {
            const res = await fetch(`${server.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
            await res.arrayBuffer()
            return res.status === 503 ? `503 retry-after ${res.headers.get('retry-after')}` : String(res.status)
          } catch (err) {
            return `failed: ${String((err as { cause?: { code?: string } }).cause?.code ?? err)}`
          }
        })
      )
      expect(outcomes.filter((o) => o !== '200' && o !== '503 retry-after 5')).toEqual([])
      expect(outcomes).toContain('503 retry-after 5')
      expect(outcomes).toContain('200') // the oldest of the bodies arriving together goes through
    } finally {
      server.child.kill('SIGKILL')
    }
  }, 120_000)
})

describe('refusals before the body is read', () => {
  it('are read whole by a client in another process: a wrong key, a body over the limit, a content type not served', async () => {
    // The server is a process of its own: a broken pipe is what a client sees when the server closes the
    // connection under its upload, and in one process the loop's order hides it.
    const server = await startServer({ COMPACT_API_KEYS: 'acme=ck-admission-test-key-0001', COMPACT_BODY_LIMIT_MB: '4' })
    try {
      const cases: [Record<string, string>, number][] = [
        [{ 'content-type': 'application/json', 'x-api-key': 'not-the-key' }, 401],
        [{ 'content-type': 'application/json', 'x-api-key': 'ck-admission-test-key-0001' }, 413],
        [{ 'content-type': 'text/plain', 'x-api-key': 'ck-admission-test-key-0001' }, 415]
      ]
      const outcomes: string[] = []
      // bodies from just over the limit to twice it, each kind of refusal several times
      for (const mib of [4.5, 5, 6, 7, 8]) {
        const body = historyOf(Math.floor(mib * MiB))
        for (const [headers, status] of cases) {
          for (let i = 0; i < 2; i++) {
            try {
              const res = await fetch(`${server.url}/v1/compact`, { method: 'POST', headers, body })
              const answer = (await res.json()) as { type?: string }
              outcomes.push(res.status === status && answer.type === 'error' ? 'read' : `${mib} MiB: ${res.status} for ${status}`)
            } catch (err) {
              outcomes.push(`${mib} MiB, ${status}: ${String((err as { cause?: { code?: string } }).cause?.code ?? err)}`)
            }
          }
        }
      }
      expect(outcomes.filter((o) => o !== 'read')).toEqual([])
    } finally {
      server.child.kill('SIGKILL')
    }
  }, 120_000)
})

describe('many refusals at once', () => {
  it('are drained a few at a time, and every sender, waiting its turn paused, reads its answer', async () => {
    const server = await startServer({ COMPACT_BODY_LIMIT_MB: '8' })
    try {
      const body = historyOf(3 * MiB)
      // more senders than bodies drained at once: the rest wait, paused, for a turn
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, async () => {
          try {
            const res = await fetch(`${server.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body })
            await res.arrayBuffer()
            return String(res.status)
          } catch (err) {
            return `failed: ${String((err as { cause?: { code?: string } }).cause?.code ?? err)}`
          }
        })
      )
      expect(outcomes.filter((o) => o !== '415')).toEqual([])
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    } finally {
      server.child.kill('SIGKILL')
    }
  }, 120_000)
})

describe('an answer nobody reads', () => {
  it('loses its connection at the idle timeout', async () => {
    const fake = await new FakeAnthropic().start()
    opened.push(fake)
    fake.fallback = { text: 'y'.repeat(24 * MiB) }
    const { app, port } = await listening({ ANTHROPIC_API_KEY: 'sk-ant-admission-0000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_IDLE_TIMEOUT_MS: '300' })
    const body = JSON.stringify({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
    const socket = connect(port, '127.0.0.1')
    await new Promise((r) => socket.once('connect', r))
    socket.on('error', () => undefined)
    opened.push({ close: () => socket.destroy() })
    socket.pause() // never reads
    socket.write(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    const connections = (): Promise<number> => new Promise((r, j) => app.server.getConnections((err, n) => (err ? j(err) : r(n))))
    await until('the model is called', () => fake.requests.length === 1)
    // far sooner than the keep-alive timeout (72 s) or the upstream's (10 minutes)
    await until('no connection is left open', async () => (await connections()) === 0)
  })

  /** A manual compaction whose kept tail is one message of `size` bytes (an answer of as much), asked for on a socket that never reads it: the connection is gone soon after the idle timeout. */
  async function unreadCompaction(size: number, ms?: number): Promise<void> {
    const { app, port } = await listening({ COMPACT_IDLE_TIMEOUT_MS: '300' })
    const body = JSON.stringify({
      mode: 'manual',
      budget_tokens: 'off',
      keep_tokens: 10_000_000,
      messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
        { role: 'user', content: 'y'.repeat(size) }
      ]
    })
    const socket = connect(port, '127.0.0.1')
    await new Promise((r) => socket.once('connect', r))
    socket.on('error', () => undefined)
    opened.push({ close: () => socket.destroy() })
    socket.pause() // never reads
    socket.write(`POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    const connections = (): Promise<number> => new Promise((r, j) => app.server.getConnections((err, n) => (err ? j(err) : r(n))))
    await until('the answer is under way', async () => (await connections()) === 1)
    // far sooner than a keep-alive timeout of its own (72 s)
    await until('no connection is left open', async () => (await connections()) === 0, ms)
  }

  it("loses its connection at the idle timeout when the whole answer fits in the sockets' buffers (the answer finished, the client never read it)", async () => {
    // 2 MiB: all of it leaves the process into the kernel's buffers, and the connection is then idle
    await unreadCompaction(2 * MiB, 10_000)
  })

  it("loses its connection at the idle timeout on the compaction route too (the gateway's own answer)", async () => {
    await unreadCompaction(24 * MiB)
  })
})
