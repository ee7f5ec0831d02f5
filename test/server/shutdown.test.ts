import { spawn } from 'node:child_process'
import { type Socket, connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { startServer } from '../helpers/process.js'
import { until } from '../helpers/wait.js'

/** A raw client connection, kept alive as HTTP/1.1 keeps it: what it has read, and when the server ends it. */
async function keptAlive(url: string): Promise<{ socket: Socket; answer: () => string; closed: Promise<void> }> {
  const socket = connect(Number(new URL(url).port), '127.0.0.1')
  socket.on('error', () => undefined)
  await new Promise((r) => socket.once('connect', r))
  let answer = ''
  socket.on('data', (d: Buffer) => (answer += d.toString()))
  const closed = new Promise<void>((r) => socket.once('end', () => r()))
  return { socket, answer: () => answer, closed }
}

describe('graceful shutdown', () => {
  it('lets an in-flight compaction finish on SIGTERM, answers it 200, and exits 0', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 1_500, toolInput: { objective: 'slow but sure' } }
    const server = await startServer({
      ANTHROPIC_API_KEY: 'sk-ant-test-shutdown-0000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_SUMMARIZER_TIMEOUT_MS: '10000',
      COMPACT_IDLE_TIMEOUT_MS: '500'
    })
    try {
      const pending = fetch(`${server.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [user('a'), assistant('b'), user('c')], mode: 'manual' })
      })
      // SIGTERM only once the model call is under way
      await until('the model is called', () => fake.requests.length > 0)
      expect(fake.requests).toHaveLength(1)
      server.child.kill('SIGTERM')
      const res = await pending
      expect(res.status).toBe(200)
      const body = (await res.json()) as { summarizer: { kind: string }; summary: { sections: { objective: string } } }
      expect(body.summarizer.kind).toBe('anthropic')
      expect(body.summary.sections.objective).toBe('slow but sure')
      expect(await server.exited).toBe(0)
      // once closed, it takes nothing new
      await expect(fetch(`${server.url}/healthz`)).rejects.toThrow()
    } finally {
      server.child.kill('SIGKILL')
      await fake.close()
    }
  })

  it('on SIGTERM answers a kept-alive connection in flight with connection: close, closes it, and exits 0 at once', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 1_500, toolInput: { objective: 'slow but sure' } }
    // a grace period longer than the test waits: a process that waited it out would fail the test
    const server = await startServer({ ANTHROPIC_API_KEY: 'sk-ant-test-shutdown-0000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_SHUTDOWN_GRACE_MS: '60000' })
    const { socket, answer, closed } = await keptAlive(server.url)
    try {
      // HTTP/1.1 without Connection: close keeps the connection alive, as curl and undici do
      const body = JSON.stringify({ messages: [user('a'), assistant('b'), user('c')], mode: 'manual' })
      socket.write(`POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
      await until('the model is called', () => fake.requests.length > 0)
      server.child.kill('SIGTERM')
      await closed
      expect(answer()).toMatch(/^HTTP\/1\.1 200 /)
      expect(answer().toLowerCase()).toContain('connection: close')
      expect(answer()).toContain('slow but sure')
      expect(await server.exited).toBe(0)
    } finally {
      socket.destroy()
      server.child.kill('SIGKILL')
      await fake.close()
    }
  })

  it('on SIGTERM closes an idle kept-alive connection of a client that stays, and exits 0', async () => {
    const server = await startServer({ COMPACT_SHUTDOWN_GRACE_MS: '60000' })
    const { socket, answer, closed } = await keptAlive(server.url)
    try {
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
      await until('the probe is answered', () => answer().includes('\r\n\r\n'))
      server.child.kill('SIGTERM')
      await closed
      expect(await server.exited).toBe(0)
    } finally {
      socket.destroy()
      server.child.kill('SIGKILL')
    }
  })

  it("on SIGTERM lets a proxied stream finish for undici's kept-alive pool and curl's, closes both connections, and exits 0 at once", async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'one two three four five six seven eight', eventDelayMs: 150 }
    const server = await startServer({ ANTHROPIC_BASE_URL: fake.url, COMPACT_SHUTDOWN_GRACE_MS: '60000' })
    const body = JSON.stringify({ model: 'm', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] })
    const headers = { 'content-type': 'application/json', 'x-api-key': 'sk-ant-client-key-0000000000', 'anthropic-version': '2023-06-01' }
    // curl: two requests on one connection, the second after the signal is refused or never made, never hangs
    const curl = new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn('curl', [
        '-sS',
        '-N',
        '-X',
        'POST',
        `${server.url}/v1/messages`,
        ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
        '--data-binary',
        body
      ])
      let out = ''
      child.stdout.on('data', (d: Buffer) => (out += d.toString()))
      child.once('exit', (code) => resolve({ code, out }))
    })
    try {
      const res = await fetch(`${server.url}/v1/messages`, { method: 'POST', headers, body })
      expect(res.status).toBe(200)
      await until('both streams are under way', () => fake.requests.length === 2)
      server.child.kill('SIGTERM')
      const text = await res.text()
      expect(text).toContain('message_stop')
      const viaCurl = await curl
      expect(viaCurl.code).toBe(0)
      expect(viaCurl.out).toContain('message_stop')
      // undici keeps its connection in the pool: the server is the one to close it
      expect(await server.exited).toBe(0)
    } finally {
      server.child.kill('SIGKILL')
      await fake.close()
    }
  })

  it('on SIGTERM drops connections that have sent nothing or part of a request, and exits 0 within the grace period', async () => {
    const server = await startServer({ COMPACT_SHUTDOWN_GRACE_MS: '3000', COMPACT_BODY_TIMEOUT_MS: '120000', COMPACT_IDLE_TIMEOUT_MS: '120000' })
    const port = Number(new URL(server.url).port)
    const sockets = await Promise.all(
      [
        '',
        'GET /healthz HTTP/1.1\r\nHost: x\r\n',
        'POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{'
      ].map(async (sent) => {
        const socket = connect(port, '127.0.0.1')
        socket.on('error', () => undefined)
        await new Promise((r) => socket.once('connect', r))
        if (sent) await new Promise<void>((r) => socket.write(sent, () => r()))
        return socket
      })
    )
    try {
      // a request answered after the three connections were made: the server has taken them
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
      server.child.kill('SIGTERM')
      // past the grace period the process would exit 1
      expect(await server.exited).toBe(0)
    } finally {
      for (const s of sockets) s.destroy()
      server.child.kill('SIGKILL')
    }
  })

  it('a second signal while a compaction is still in flight exits 1 at once, and says so', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 20_000, toolInput: { objective: 'never waited for' } }
    const server = await startServer({
      ANTHROPIC_API_KEY: 'sk-ant-test-shutdown-0000000001',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_SUMMARIZER_TIMEOUT_MS: '30000',
      COMPACT_SHUTDOWN_GRACE_MS: '25000'
    })
    try {
      const pending = fetch(`${server.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [user('a'), assistant('b'), user('c')], mode: 'manual' })
      }).catch((err: unknown) => err)
      await until('the model is called', () => fake.requests.length > 0)
      expect(fake.requests).toHaveLength(1)
      server.child.kill('SIGTERM')
      await until('the server says it is shutting down', () => server.stdout().includes('shutting down'))
      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(1)
      expect(server.stdout()).toContain('second signal while closing')
      await pending
    } finally {
      server.child.kill('SIGKILL')
      await fake.close()
    }
  })
})
