import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { GatewayError, InvalidRequestError, UnsupportedMediaTypeError } from '../contract/errors.js'

/**
 * The socket's idle timeout bounds a client that stalls while it sends or while it reads the answer,
 * never the server's own work: it is lifted once the body is in and set again when the answer starts.
 * A compaction that waits a minute for the model is therefore never cut by a socket timeout; its time
 * is bounded by the summary queue's wait and the summarizer's deadline instead.
 */
function installTimeouts(app: FastifyInstance, idleTimeoutMs: number): void {
  // (app.inject's requests have a stand-in socket without timeouts.)
  const idle = (request: FastifyRequest, ms: number): void => void (request.raw.socket as Partial<Socket> | undefined)?.setTimeout?.(ms)
  // Callback hooks, not async ones: every request runs them, and a promise each is a turn of the loop.
  app.addHook('preValidation', (request, _reply, done) => {
    idle(request, 0)
    done()
  })
  app.decorateReply('watchClient', function watchClient(this: FastifyReply) {
    const { request } = this
    idle(request, idleTimeoutMs)
    // An answer may be silent for as long as its source is (a model's stream: undici's body timeout bounds
    // that); its client may not: when the idle timeout finds bytes waiting for a client that does not read
    // them, the connection is dropped, whatever the route.
    const socket = request.raw.socket as Partial<Socket> | undefined
    // a listener for every timeout: without one, Node drops the connection at the first silence, a model's included
    this.raw.on('timeout', () => {
      if (socket?.writableLength) socket.destroy?.()
    })
  })
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.watchClient()
    done(null, payload)
  })
}

/** Query parameters under which clients put keys; a key in a URL ends up in proxies' and browsers' logs. */
const KEY_PARAMETERS = new Set(['api_key', 'apikey', 'api-key', 'key', 'x-api-key', 'access_token', 'token', 'authorization', 'auth'])

/**
 * Checks every request makes before its body is read: no key in the query string (refused, so that it
 * is used once and then moved to a header) and no content-encoding the server cannot read.
 */
function installRequestChecks(app: FastifyInstance): void {
  // A callback hook, not an async one: every request runs it, and a promise each is a turn of the loop.
  app.addHook('onRequest', (request, _reply, done) => done(requestProblem(request)))
}

/** Why a request is refused before its body is read, or undefined. */
function requestProblem(request: FastifyRequest): GatewayError | undefined {
  const q = request.url.indexOf('?')
  if (q >= 0) {
    // Gemini's API takes its key as `key` in the query, and its clients may send it so: taken there (the
    // request line logs the query without its values), and never forwarded in a URL
    const gemini = request.url.startsWith('/v1beta/')
    for (const name of new URLSearchParams(request.url.slice(q + 1)).keys()) {
      if (KEY_PARAMETERS.has(name.toLowerCase()) && !(gemini && name === 'key')) {
        return new InvalidRequestError(`API keys are not accepted in the URL (query parameter "${name}"): send Authorization: Bearer KEY or x-api-key: KEY`)
      }
    }
  }
  const encoding = request.headers['content-encoding']
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    return new UnsupportedMediaTypeError(`content-encoding "${encoding}" is not supported: send the body uncompressed`)
  }
  return undefined
}

export interface AdmissionOptions {
  /** Most bytes of request bodies in flight at once. */
  maxBytes: number
  retryAfterS: number
}

declare module 'fastify' {
  interface FastifyReply {
    /**
     * The client's idle timeout set again as its answer starts, and a client that stops reading dropped at
     * it: every answer's (an onSend hook), and an answer written past Fastify's send (the proxy's relay).
     */
    watchClient(): void
  }
  interface FastifyRequest {
    /** Bytes of this request's body received so far and counted in flight. */
    admittedBytes: number
    /**
     * Counts bytes of this request's body as they arrive: undefined while they fit the in-flight bound, or
     * the 503 to answer with once they do not (body readers call it for every chunk).
     */
    admit(bytes: number): GatewayError | undefined
  }
}

/**
 * Bounds the bytes of bodies in flight, counted as they arrive (so a sender that announces 32 MiB and
 * sends a byte a second holds what it sent, not what it announced), given back when the request is
 * answered. Older bodies come first: a body's next chunk is refused (a 503 with Retry-After) when it
 * would pass the bound beside the bodies that began arriving before it; where it passes the bound only
 * beside younger ones, the youngest of those are refused at their next chunk instead, until it fits. A
 * burst of large bodies arriving together thus gets as many of the first through as the bound holds,
 * instead of each being turned away with part of it read. A body alone is never refused for its size
 * (the body limit is). Once the bound is reached, new requests get the 503 before their body is read.
 * Either way the client is let finish sending (lingerPlugin), so that it reads the answer.
 */
function installAdmission(app: FastifyInstance, options: AdmissionOptions): void {
  let inflight = 0
  /** Of those, the bytes of refused bodies not yet given back (they are as good as gone to the bodies still admitted). */
  let leaving = 0
  /** The requests holding bytes, oldest first (a Map keeps the order they were added in). */
  const holders = new Map<FastifyRequest, true>()
  /** Requests refused while their body arrives (or to refuse at their next chunk, so that an older one fits). */
  const evicted = new WeakSet<FastifyRequest>()
  const overloaded = (): GatewayError =>
    new GatewayError('overloaded', `too many request bytes in flight (COMPACT_MAX_INFLIGHT_MB); retry in ${options.retryAfterS} s`, {
      headers: { 'retry-after': String(options.retryAfterS) }
    })
  /** Bytes held by the bodies that began arriving before `request`'s. */
  const heldBefore = (request: FastifyRequest): number => {
    let held = 0
    for (const r of holders.keys()) {
      if (r === request) break
      if (!evicted.has(r)) held += r.admittedBytes
    }
    return held
  }
  /** Marks the youngest holders still receiving, younger than `request`, until what they hold leaves room for `need` more bytes. */
  const evictFor = (request: FastifyRequest, need: number): void => {
    for (const r of [...holders.keys()].reverse()) {
      if (r === request || inflight - leaving + need <= options.maxBytes) return
      if (r.raw.complete || evicted.has(r)) continue
      evicted.add(r)
      leaving += r.admittedBytes
    }
  }
  app.decorateRequest('admittedBytes', 0)
  app.decorateRequest('admit', function admit(this: FastifyRequest, bytes: number): GatewayError | undefined {
    if (evicted.has(this)) return overloaded()
    if (inflight - leaving + bytes > options.maxBytes && inflight - leaving > this.admittedBytes) {
      const older = heldBefore(this)
      if (older > 0 && older + this.admittedBytes + bytes > options.maxBytes) {
        // refused: what it holds is given back once it is answered, and is no one's room to wait for
        evicted.add(this)
        leaving += this.admittedBytes
        return overloaded()
      }
      // Younger bodies hold the room this one needs: they are refused as their next chunk comes, and what
      // they hold is given back once they are answered (until then the bound is passed by what they hold).
      evictFor(this, bytes)
    }
    inflight += bytes
    this.admittedBytes += bytes
    holders.set(this, true)
    return undefined
  })
  app.addHook('onRequest', (request, _reply, done) => {
    const body = request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH'
    done(body && inflight >= options.maxBytes && request.headers['content-length'] !== '0' ? overloaded() : undefined)
  })
  const release = (request: FastifyRequest): void => {
    if (evicted.has(request)) leaving -= request.admittedBytes
    inflight -= request.admittedBytes
    request.admittedBytes = 0
    holders.delete(request)
  }
  app.addHook('onResponse', (request, _reply, done) => {
    release(request)
    done()
  })
  app.addHook('onRequestAbort', (request, done) => {
    release(request)
    done()
  })
}

export interface LingerOptions {
  /** The most body bytes read and dropped after a refusal; a body announced larger is not waited for. */
  maxBytes: number
  /** How long a refusal waits for more of its body once draining it; silence this long ends the wait. */
  ms: number
  /** Bodies drained at once (the rest wait their turn, paused); 16 unless set. */
  concurrency?: number
}

/**
 * Refusals that come before the body is read (a wrong key, the rate limit, the in-flight bound, a body too
 * large): closing the connection under a client that is still sending makes it see a broken pipe instead
 * of the answer (Node's fetch, and so the SDKs, do). The rest of the body is read and dropped first,
 * bounded in bytes and by silence, as a web server's lingering close does; past either bound the answer
 * goes with the connection closed.
 *
 * Draining is what a flood of refused bodies costs the event loop: each turn of the loop reads as much as
 * the kernel holds for every socket being read (libuv takes up to 32 reads of 64 KiB per socket a turn),
 * and a probe of /healthz waits for that turn to end. So a few bodies are drained at once and the rest
 * wait paused (their senders held by TCP's own flow control), which bounds the bytes a turn reads whatever
 * the number of senders; the total is drained as fast as before, in turns.
 */
function installLinger(app: FastifyInstance, options: LingerOptions): void {
  const concurrency = options.concurrency ?? 16
  let draining = 0
  const waiting: (() => void)[] = []
  const next = (): void => {
    draining--
    const start = waiting.shift()
    if (start) {
      draining++
      start()
    }
  }
  app.addHook('onSend', (request, reply, payload, done) => {
    const raw = request.raw
    // (app.inject's requests are whole before they start)
    if (reply.statusCode < 400 || raw.complete !== false || raw.destroyed || !raw.socket) return done(null, payload)
    const declared = Number(request.headers['content-length'])
    if (declared > options.maxBytes) {
      void reply.header('connection', 'close')
      return done(null, payload)
    }
    raw.pause()
    let dropped = 0
    let timer: NodeJS.Timeout | undefined
    let finished = false
    const finish = (close: boolean): void => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      raw.off('data', onData).off('end', onEnd).off('error', onFault).off('close', onFault)
      if (started) next()
      else if (waiting.includes(start)) waiting.splice(waiting.indexOf(start), 1)
      if (close) void reply.header('connection', 'close')
      done(null, payload)
    }
    const onData = (chunk: Buffer): void => {
      dropped += chunk.length
      if (dropped > options.maxBytes) return finish(true)
      timer?.refresh()
    }
    const onEnd = (): void => finish(false)
    const onFault = (): void => finish(true)
    let started = false
    const start = (): void => {
      started = true
      timer = setTimeout(onFault, options.ms)
      raw.on('data', onData).resume()
    }
    // a client that goes away while it waits its turn gives its turn up
    raw.on('end', onEnd).on('error', onFault).on('close', onFault)
    if (draining < concurrency) {
      draining++
      start()
    } else waiting.push(start)
  })
}

/**
 * On close, connections with no request being worked on are dropped: Fastify closes idle kept-alive
 * ones, but a connection that has sent nothing yet, or only part of a request (its headers, part of its
 * body), would hold the shutdown until its timeout or the grace period's end. A request whose body is in
 * (a compaction being worked on, an answer being sent) is let finish, and its connection ends with it. Read from the socket at close, so
 * that no request pays for it.
 */
function installShutdownDrain(app: FastifyInstance): void {
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  app.addHook('preClose', (done) => {
    for (const socket of sockets) {
      // the answer Node is writing on this socket, and the request it answers
      const res = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage
      if (!(res && !res.writableFinished && res.req.complete)) {
        socket.destroy()
        continue
      }
      // The answer in flight is the connection's last: said so where its head is still to go, and the
      // connection ended once it is sent either way (a stream's head went out saying keep-alive, and a
      // client that keeps its connection would otherwise hold the close until the keep-alive timeout).
      if (!res.headersSent) res.shouldKeepAlive = false
      res.once('finish', () => socket.end())
    }
    done()
  })
}

/** The guards of every connection and request, as plugins of the root (their hooks apply to every route). */
export const timeoutsPlugin = fp<{ idleTimeoutMs: number }>(async (app, { idleTimeoutMs }) => installTimeouts(app, idleTimeoutMs), { name: 'timeouts' })
export const shutdownDrainPlugin = fp(async (app) => installShutdownDrain(app), { name: 'shutdown-drain' })
export const requestChecksPlugin = fp(async (app) => installRequestChecks(app), { name: 'request-checks' })
export const admissionPlugin = fp<AdmissionOptions>(async (app, options) => installAdmission(app, options), { name: 'admission' })
export const lingerPlugin = fp<LingerOptions>(async (app, options) => installLinger(app, options), { name: 'linger' })
