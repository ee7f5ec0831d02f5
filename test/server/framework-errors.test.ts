import { connect } from 'node:net'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'

let app: App
let port = 0
beforeAll(async () => {
  app = await testApp({ COMPACT_BODY_TIMEOUT_MS: '1500', COMPACT_IDLE_TIMEOUT_MS: '5000' })
  await app.listen({ port: 0, host: '127.0.0.1' })
  port = (app.server.address() as { port: number }).port
})
afterAll(async () => {
  await app.close()
})

/** Sends raw bytes on a fresh socket and reads everything the server answers until it closes. */
function raw(request: string | Buffer, { keepSending }: { keepSending?: number } = {}): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let data = ''
    let timer: NodeJS.Timeout | undefined
    socket.on('connect', () => {
      socket.write(request)
      // a client that trickles a byte now and then, never finishing its body
      if (keepSending) timer = setInterval(() => socket.writable && socket.write('x'), keepSending)
    })
    socket.on('data', (d) => (data += d.toString()))
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearInterval(timer)
      const [head = '', body = ''] = data.split('\r\n\r\n')
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0)
      if (!status) reject(new Error(`no HTTP answer: ${JSON.stringify(data)}`))
      else resolve({ status, headers: head, body })
    })
    setTimeout(() => socket.destroy(), 10_000)
  })
}

function expectShape(body: string, type: string): void {
  expect(JSON.parse(body)).toEqual({ type: 'error', error: { type, message: expect.any(String) } })
}

describe('errors the framework and the socket raise, in the one error shape', () => {
  it('a bad percent-escape in the URL: 400', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/sessions/%E0%A4%A/compactions' })
    expect(res.statusCode).toBe(400)
    expectShape(res.body, 'invalid_request_error')
  })

  it('a known path with another method: 405 with Allow', async () => {
    const res = await app.inject({ method: 'DELETE', url: '/v1/compact' })
    expect(res.statusCode).toBe(405)
    expect(res.headers.allow).toBe('POST')
    expectShape(res.body, 'invalid_request_error')
    const sessions = await app.inject({ method: 'PUT', url: '/v1/sessions/s1/compactions' })
    expect(sessions.statusCode).toBe(405)
    expect(sessions.headers.allow).toContain('GET')
  })

  it('a content type the server does not read: 415, saying what to send instead', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'content-type': 'text/plain; charset=utf-8' }, payload: 'hello' })
    expect(res.statusCode).toBe(415)
    expectShape(res.body, 'invalid_request_error')
    expect(res.json().error.message).toBe('the body must be JSON: send it with content-type: application/json (it came as text/plain)')
  })

  it('a gzip body, even of valid JSON: 415 naming the encoding, never noise in a message', async () => {
    const body = gzipSync(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }))
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      payload: body
    })
    expect(res.statusCode).toBe(415)
    expect(res.json().error.message).toContain('content-encoding "gzip" is not supported')
  })

  it('headers of 20 KB: 431', async () => {
    const res = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
    expect(res.status).toBe(431)
    expectShape(res.body, 'invalid_request_error')
  })

  it('a malformed request line: 400', async () => {
    const res = await raw('GARBAGE\r\n\r\n')
    expect(res.status).toBe(400)
    expectShape(res.body, 'invalid_request_error')
  })

  it('Content-Length with Transfer-Encoding: 400', async () => {
    const res = await raw(
      'POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
    )
    expect(res.status).toBe(400)
    expectShape(res.body, 'invalid_request_error')
  })

  it('a body that trickles in past COMPACT_BODY_TIMEOUT_MS: 408, and the connection closed', async () => {
    const res = await raw('POST /v1/compact HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{', { keepSending: 200 })
    expect(res.status).toBe(408)
    expectShape(res.body, 'timeout_error')
  })

  it('a session id that POST accepts can be read back (200 characters, percent-encoded)', async () => {
    const id = `sessión/${'é'.repeat(100)}${'x'.repeat(92)}`
    expect(id.length).toBe(200)
    const post = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      payload: {
        mode: 'manual',
        session_id: id,
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
          { role: 'user', content: 'c' }
        ]
      }
    })
    expect(post.statusCode).toBe(200)
    const get = await app.inject({ method: 'GET', url: `/v1/sessions/${encodeURIComponent(id)}/compactions` })
    expect(get.statusCode).toBe(200)
    expect(get.json().compactions).toHaveLength(1)
  })
})
