import type { Readable } from 'node:stream'
import { type FastifyRequest, errorCodes } from 'fastify'

/**
 * A body of this many bytes or more (by its Content-Length) is copied as it arrives into a buffer of its
 * own; a smaller one is joined once at the end. Writing each chunk into fresh memory costs its first touch
 * of every page, which a join of a few hundred KiB does not repay (docs/performance.md).
 */
export const SPREAD_COPY_FROM_BYTES = 1024 * 1024

/**
 * Reads a request body into one buffer, as Fastify's reader does (the same limit, the same errors). Fastify
 * gathers the chunks and joins them at the end: for a body of megabytes that join is one copy of it into
 * fresh memory, long enough for /healthz to wait (docs/performance.md). Here a body of
 * SPREAD_COPY_FROM_BYTES or more is copied chunk by chunk as it arrives into a buffer sized from
 * Content-Length, which owns its memory, so it can be moved to a worker without another copy; a smaller
 * one, or one without Content-Length, is gathered and joined. Each chunk is first offered to `admit` (the
 * in-flight bound): an error from it ends the read with that error.
 */
export function readBody(
  payload: Readable,
  contentLength: string | undefined,
  limit: number,
  done: (err: Error | null, body?: Buffer) => void,
  admit?: (bytes: number) => Error | undefined
): void {
  const declared = contentLength === undefined ? Number.NaN : Number(contentLength)
  if (declared > limit) {
    done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE())
    return
  }
  const sized = Number.isInteger(declared) && declared >= 0
  const most = sized ? declared : Number.POSITIVE_INFINITY
  // allocUnsafeSlow: memory of its own (never a slice of Node's shared pool), touched only as it is written
  const whole = sized && declared >= SPREAD_COPY_FROM_BYTES ? Buffer.allocUnsafeSlow(declared) : undefined
  const chunks: Buffer[] = []
  let received = 0

  const stop = (): void => {
    // paused: what is not read is not received (TCP holds the sender); a refusal's drain resumes it in turn
    payload.pause()
    payload.removeListener('data', onData)
    payload.removeListener('end', onEnd)
    payload.removeListener('error', onEnd)
  }
  function onData(chunk: Buffer | string): void {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    if (received + bytes.length > limit || received + bytes.length > most) {
      stop()
      // more than the limit, or more than Content-Length said: the same answers Fastify gives
      done(received + bytes.length > limit ? new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE() : new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH())
      return
    }
    const refused = admit?.(bytes.length)
    if (refused) {
      stop()
      done(refused)
      return
    }
    if (whole !== undefined) bytes.copy(whole, received)
    else chunks.push(bytes)
    received += bytes.length
  }
  function onEnd(err?: Error & { statusCode?: number }): void {
    stop()
    if (err != null) {
      if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400
      done(err)
      return
    }
    if (sized && received !== declared) {
      done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH())
      return
    }
    done(null, whole ?? Buffer.concat(chunks, received))
  }
  payload.on('data', onData)
  payload.on('end', onEnd)
  payload.on('error', onEnd)
  payload.resume()
}

/**
 * A content-type parser over readBody: the body's bytes, counted against the in-flight bound as they arrive
 * and limited to the server's body limit, handed to `parse`.
 */
export function bodyParser<T>(
  bodyLimit: number,
  parse: (bytes: Buffer, request: FastifyRequest) => { value: T; error?: undefined } | { value?: undefined; error: Error }
) {
  return (request: FastifyRequest, payload: Readable, done: (err: Error | null, body?: T) => void): void => {
    readBody(
      payload,
      request.headers['content-length'],
      bodyLimit,
      (err, bytes) => {
        if (err || bytes === undefined) return done(err ?? new Error('no body'))
        const parsed = parse(bytes, request)
        if (parsed.error) done(parsed.error)
        else done(null, parsed.value)
      },
      (n) => request.admit(n)
    )
  }
}
