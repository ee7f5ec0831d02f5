import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ApiError } from './errors.js'

/**
 * The socket's idle timeout bounds a client that stalls while it sends or while it reads the answer,
 * never the server's own work: it is lifted once the body is in and set again when the answer starts.
 * A compaction that waits a minute for the model is therefore never cut by a socket timeout; its time
 * is bounded by the summary queue's wait and the summarizer's deadline instead.
 */
export function installTimeouts(app: FastifyInstance, idleTimeoutMs: number): void {
  // (app.inject's requests have a stand-in socket without timeouts.)
  const idle = (request: FastifyRequest, ms: number): void => void (request.raw.socket as Partial<Socket> | undefined)?.setTimeout?.(ms)
  // Callback hooks, not async ones: every request runs them, and a promise each is a turn of the loop.
  app.addHook('preValidation', (request, _reply, done) => {
    idle(request, 0)
    done()
  })
  app.addHook('onSend', (request, _reply, payload, done) => {
    idle(request, idleTimeoutMs)
    done(null, payload)
  })
}

/** Query parameters under which clients put keys; a key in a URL ends up in proxies' and browsers' logs. */
const KEY_PARAMETERS = new Set(['api_key', 'apikey', 'api-key', 'key', 'x-api-key', 'access_token', 'token', 'authorization', 'auth'])

/**
 * Checks every request makes before its body is read: no key in the query string (refused, so that it
 * is used once and then moved to a header) and no content-encoding the server cannot read.
 */
export function installRequestChecks(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    const q = request.url.indexOf('?')
    if (q >= 0) {
      for (const name of new URLSearchParams(request.url.slice(q + 1)).keys()) {
        if (KEY_PARAMETERS.has(name.toLowerCase())) {
          throw new ApiError(400, 'invalid_request_error', `API keys are not accepted in the URL (query parameter "${name}"): send Authorization: Bearer KEY or x-api-key: KEY`)
        }
      }
    }
    const encoding = request.headers['content-encoding']
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      throw new ApiError(415, 'invalid_request_error', `content-encoding "${encoding}" is not supported: send the body uncompressed`)
    }
  })
}

export interface AdmissionOptions {
  /** Most bytes of request bodies in flight at once. */
  maxBytes: number
  /** What a body without a Content-Length may grow to, and so what it reserves. */
  bodyLimit: number
  retryAfterS: number
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Bytes this request reserved of the in-flight bound. */
    admittedBytes: number
  }
}

/**
 * Bounds the bytes of bodies in flight: a request reserves its Content-Length (or the body limit, when
 * it sends none) before its body is read, and gives it back when answered. Past the bound it gets a 503
 * with Retry-After, and its connection is closed so that its body is never read.
 */
export function installAdmission(app: FastifyInstance, options: AdmissionOptions): void {
  let inflight = 0
  app.decorateRequest('admittedBytes', 0)
  app.addHook('onRequest', async (request, reply) => {
    if (request.method !== 'POST' && request.method !== 'PUT' && request.method !== 'PATCH') return
    const length = Number(request.headers['content-length'] ?? Number.NaN)
    const bytes = Number.isFinite(length) ? length : options.bodyLimit
    if (bytes > 0 && inflight + bytes > options.maxBytes && inflight > 0) {
      void reply.header('connection', 'close')
      throw new ApiError(503, 'overloaded_error', `too many request bytes in flight (COMPACT_MAX_INFLIGHT_MB); retry in ${options.retryAfterS} s`, undefined, {
        'retry-after': String(options.retryAfterS)
      })
    }
    inflight += bytes
    request.admittedBytes = bytes
  })
  const release = async (request: FastifyRequest): Promise<void> => {
    inflight -= request.admittedBytes
    request.admittedBytes = 0
  }
  app.addHook('onResponse', release)
  app.addHook('onRequestAbort', release)
}
