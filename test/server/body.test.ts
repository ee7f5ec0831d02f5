import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { SPREAD_COPY_FROM_BYTES, readBody } from '../../src/server/body.js'

function read(
  chunks: (string | Buffer)[],
  contentLength: string | undefined,
  limit = 1_000,
  fail?: Error
): Promise<{ err: (Error & { statusCode?: number; code?: string }) | null; body?: Buffer }> {
  const stream = new PassThrough()
  const result = new Promise<{ err: Error | null; body?: Buffer }>((resolve) => readBody(stream, contentLength, limit, (err, body) => resolve({ err, body })))
  for (const c of chunks) stream.write(c)
  if (fail) stream.destroy(fail)
  else stream.end()
  return result
}

describe('readBody', () => {
  it('reads a body of megabytes with Content-Length into one buffer that owns its memory, chunk by chunk', async () => {
    const text = `{"a":"${'é'.repeat(SPREAD_COPY_FROM_BYTES / 2)}"}`
    const bytes = Buffer.from(text)
    const { err, body } = await read(
      [bytes.subarray(0, 5), bytes.subarray(5, 70_001), bytes.subarray(70_001)],
      String(bytes.length),
      4 * SPREAD_COPY_FROM_BYTES
    )
    expect(err).toBeNull()
    expect(body?.toString('utf8')).toBe(text)
    expect(body?.byteOffset).toBe(0)
    expect(body?.buffer.byteLength).toBe(body?.byteLength)
  })

  it('reads a smaller body with Content-Length by joining its chunks, split anywhere', async () => {
    const text = '{"a":1,"b":"é😀"}'
    const bytes = Buffer.from(text)
    for (let cut = 0; cut <= bytes.length; cut++) {
      const { err, body } = await read([bytes.subarray(0, cut), bytes.subarray(cut)], String(bytes.length))
      expect(err).toBeNull()
      expect(body?.toString('utf8')).toBe(text)
    }
  })

  it('reads a body without Content-Length by joining its chunks', async () => {
    const { err, body } = await read(['[1,', '2]'], undefined)
    expect(err).toBeNull()
    expect(body?.toString()).toBe('[1,2]')
  })

  it('refuses a body over the limit with Fastify’s 413, by its declared length or by what arrives', async () => {
    const declared = await read([], '5000')
    expect(declared.err?.code).toBe('FST_ERR_CTP_BODY_TOO_LARGE')
    expect(declared.err?.statusCode).toBe(413)
    const streamed = await read(['x'.repeat(600), 'y'.repeat(600)], undefined)
    expect(streamed.err?.code).toBe('FST_ERR_CTP_BODY_TOO_LARGE')
  })

  it('refuses a body longer or shorter than its Content-Length with Fastify’s 400, large or small', async () => {
    expect((await read(['abcdef'], '3')).err?.code).toBe('FST_ERR_CTP_INVALID_CONTENT_LENGTH')
    const short = await read(['ab'], '3')
    expect(short.err?.code).toBe('FST_ERR_CTP_INVALID_CONTENT_LENGTH')
    expect(short.err?.statusCode).toBe(400)
    const large = SPREAD_COPY_FROM_BYTES + 10
    expect((await read(['x'.repeat(large + 1)], String(large), 2 * large)).err?.code).toBe('FST_ERR_CTP_INVALID_CONTENT_LENGTH')
    expect((await read(['x'.repeat(large - 1)], String(large), 2 * large)).err?.code).toBe('FST_ERR_CTP_INVALID_CONTENT_LENGTH')
  })

  it('passes a stream error on as a 400 unless it has a status of its own', async () => {
    const { err } = await read(['ab'], '10', 1_000, new Error('aborted'))
    expect(err?.message).toBe('aborted')
    expect(err?.statusCode).toBe(400)
  })
})
