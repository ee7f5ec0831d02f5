import { hash, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AuthenticationError, GatewayError, RateLimitError } from '../contract/errors.js'
import { at } from '../compaction/index.js'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyRequest {
    /** The name of the API key the request presented; empty without auth. */
    keyName: string
  }
}

/** Routes anyone may call, with no key and no rate limit: probes and the scrape. */
export const OPEN_ROUTES: ReadonlySet<string> = new Set(['/', '/openapi.yaml', '/healthz', '/readyz', '/metrics', '/ui', '/ui/', '/ui/app.js', '/ui/app.css'])

/** A key's SHA-256 (the one-shot hash: no Hash object a request). */
function digest(value: string): Buffer {
  return hash('sha256', value, 'buffer')
}

/** The key a request presents, as `Authorization: Bearer KEY` or `x-api-key: KEY`, or as Gemini's clients send it (`x-goog-api-key`, `key` in the query of its routes). */
function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization
  if (typeof header === 'string') {
    const m = /^Bearer\s+(.+)$/i.exec(header.trim())
    if (m) return at(m, 1).trim()
  }
  for (const name of ['x-api-key', 'x-goog-api-key']) {
    const apiKey = request.headers[name]
    if (typeof apiKey === 'string' && apiKey.trim() !== '') return apiKey.trim()
  }
  if (request.url.startsWith('/v1beta/')) {
    const q = request.url.indexOf('?')
    const key = q < 0 ? null : new URLSearchParams(request.url.slice(q + 1)).get('key')
    if (key) return key.trim()
  }
  return undefined
}

export interface AuthOptions {
  /** Failed authentications an address may make in a minute before it is answered 429. */
  failuresPerMinute: number
  now: () => number
  /** The tenant of a key given without a name, by the key's SHA-256 (service/tenants.ts); asked once a key. */
  tenantOf?: (digest: Buffer) => Promise<string>
}

const WINDOW_MS = 60_000
/**
 * How many times an address's limit the connection's own peer may fail, where a trusted proxy names another
 * address (COMPACT_TRUST_PROXY): every client behind that proxy shares it, and a client that writes its own
 * X-Forwarded-For (a proxy trusted whole takes the first address, the client's to write) still comes from it.
 */
const PEER_SHARE = 10

/**
 * Failed authentications in fixed one-minute windows, by what they came from: the client's address, the
 * connection's peer, and the wrong key itself (by a hash, kept in memory for the minute): past a limit the
 * request is answered 429 before its key is even looked at, so keys cannot be guessed at the request rate,
 * nor a leaked key tried from many addresses. The table is dropped whole at each new window, so it holds at
 * most one minute of them.
 */
class FailureLimit {
  private counts = new Map<string, number>()
  private windowEnds = 0

  constructor(private readonly options: AuthOptions) {}

  private roll(): void {
    const now = this.options.now()
    if (now >= this.windowEnds) {
      this.counts = new Map()
      this.windowEnds = now + WINDOW_MS
    }
  }

  /** Seconds until what `source` names may try again (`share`: times the limit it has), or 0 when it may now. */
  blockedFor(source: string, share = 1): number {
    this.roll()
    if ((this.counts.get(source) ?? 0) < this.options.failuresPerMinute * share) return 0
    return Math.max(1, Math.ceil((this.windowEnds - this.options.now()) / 1_000))
  }

  fail(sources: readonly string[]): void {
    this.roll()
    for (const source of sources) this.counts.set(source, (this.counts.get(source) ?? 0) + 1)
  }
}

/**
 * Checks every non-open route's key against the configured ones. Each comparison is of two SHA-256
 * digests with timingSafeEqual, and every key is compared, so timing tells nothing about which matched.
 * A 401 carries a Bearer challenge; an address that keeps presenting wrong keys is answered 429 with Retry-After.
 */
function installAuth(app: FastifyInstance, keys: ReadonlyMap<string, string | undefined>, options: AuthOptions): void {
  app.decorateRequest('keyName', '')
  if (keys.size === 0) return
  const known = [...keys].map(([key, name]) => ({ digest: digest(key), name }))
  const failures = new FailureLimit(options)
  const { tenantOf } = options
  // A callback hook, not an async one: every request runs it, and a promise each is a turn of the loop.
  app.addHook('onRequest', (request, _reply, done) => {
    const refused = authenticate(request)
    if (!(refused instanceof Unnamed)) {
      done(refused)
      return
    }
    // a key given without a name: its tenant's name worked out (once a key), then the request goes on
    if (!tenantOf) {
      done(new GatewayError('internal', 'a key was given without a name, and the gateway has no way to name its tenant'))
      return
    }
    tenantOf(refused.digest).then(
      (name) => {
        refused.entry.name = name
        request.keyName = name
        done()
      },
      (err: unknown) => done(err instanceof GatewayError ? err : new GatewayError('internal', String(err)))
    )
  })

  /** Names the request's key (request.keyName), or says why it is refused. */
  function authenticate(request: FastifyRequest): GatewayError | Unnamed | undefined {
    if (OPEN_ROUTES.has(request.url.split('?', 1)[0] ?? '')) return undefined
    const address = `ip:${request.ip}`
    const peerAddress = request.socket.remoteAddress
    const peer = peerAddress !== undefined && peerAddress !== request.ip ? `peer:${peerAddress}` : undefined
    const wait = Math.max(failures.blockedFor(address), peer ? failures.blockedFor(peer, PEER_SHARE) : 0)
    if (wait > 0) {
      return new RateLimitError(`too many failed authentications from this address; retry in ${wait} s`, wait)
    }
    const key = presentedKey(request)
    // A request with no key guesses nothing (a client's probe of HEAD /, say): only a wrong key is a failed login.
    if (key === undefined) {
      return new AuthenticationError('an API key is required: send Authorization: Bearer KEY or x-api-key: KEY')
    }
    const presented = digest(key)
    let match: (typeof known)[number] | undefined
    for (const k of known) if (timingSafeEqual(presented, k.digest) && match === undefined) match = k
    if (match === undefined) {
      const fingerprint = `key:${presented.toString('base64url', 0, 12)}`
      const keyWait = failures.blockedFor(fingerprint)
      failures.fail(peer ? [address, peer, fingerprint] : [address, fingerprint])
      if (keyWait > 0) return new RateLimitError(`too many failed authentications with this key; retry in ${keyWait} s`, keyWait)
      return new AuthenticationError('invalid API key')
    }
    if (match.name === undefined) return new Unnamed(match, presented)
    request.keyName = match.name
    return undefined
  }
}

/** A key that matched but whose tenant has no name yet (given without one): the name is worked out before the request goes on. */
class Unnamed {
  constructor(
    readonly entry: { name: string | undefined },
    readonly digest: Buffer
  ) {}
}

/** Every route's key checked (but the open ones'), before its body is read. */
export const authPlugin = fp<AuthOptions & { keys: ReadonlyMap<string, string | undefined> }>(
  async (app, { keys, ...options }) => installAuth(app, keys, options),
  {
    name: 'auth'
  }
)
