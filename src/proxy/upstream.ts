import type { EventEmitter } from 'node:events'
import type { IncomingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import { Pool, errors } from 'undici'
import { GatewayError } from '../contract/errors.js'

/** Where the gateway forwards an API's requests. */
export interface UpstreamOptions {
  /** The API's base URL (ANTHROPIC_BASE_URL, OPENAI_BASE_URL), a path prefix allowed. */
  baseUrl: string
  /** The API's name, in errors: "the Messages API" by default. */
  name?: string
  /** How long the upstream may take to start answering, and may then stay silent between chunks. */
  timeoutMs: number
  /** Connections kept to the upstream at most. */
  connections: number
}

export interface UpstreamResponse {
  status: number
  headers: Record<string, string | string[]>
  /** The body as it arrives: piped to the client chunk by chunk, never buffered whole. */
  body: Readable
}

/** Headers of a single hop: never forwarded either way. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
  'content-length'
])

/**
 * Headers that say who sent a request through which proxies. The gateway calls the upstream as its own client
 * (with its own key), so it drops the client's: any client could write them, and the upstream would take them
 * for the gateway's word.
 */
const CLIENT_ADDRESS = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-real-ip', 'true-client-ip', 'via']

/**
 * Request headers that stay at the gateway: the hop's own, the client's credentials (the gateway sends its
 * own), `accept-encoding` (the gateway reads the stream it relays, so the upstream answers uncompressed), and
 * the client's address headers (CLIENT_ADDRESS).
 */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'host', 'x-api-key', 'x-goog-api-key', 'authorization', 'cookie', 'accept-encoding', 'expect', ...CLIENT_ADDRESS])

/**
 * The headers sent upstream: every end-to-end header the client sent (anthropic-version, anthropic-beta,
 * x-app, x-claude-code-session-id, anthropic-dangerous-direct-browser-access…), and the credentials given.
 * Hop-by-hop headers (and those the client's `connection` names), its x-api-key, Authorization and
 * cookies, and the gateway's own x-compaction-* headers never are.
 */
export function upstreamHeaders(incoming: IncomingHttpHeaders, credentials: Record<string, string>): Record<string, string> {
  const named =
    typeof incoming.connection === 'string'
      ? incoming.connection
          .toLowerCase()
          .split(',')
          .map((t) => t.trim())
      : []
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || NOT_FORWARDED.has(name) || name.startsWith('x-compaction-') || named.includes(name)) continue
    out[name] = Array.isArray(value) ? value.join(', ') : value
  }
  out['content-type'] = 'application/json'
  return { ...out, ...credentials }
}

/** The response headers given back to the client: everything but the hop-by-hop ones. */
export function clientHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name.toLowerCase())) out[name] = value
  return out
}

/** The upstream could not be reached or did not answer in time: 502 or 504, in the gateway's error shape. */
export class UpstreamError extends GatewayError {}

/**
 * An HTTP client for an upstream API: a pool of kept-alive connections to one origin, timeouts fit for
 * a model that thinks for minutes and for streams that stay open as long (each bounds a silence, not the
 * whole answer), and cancellation that reaches the upstream when the client goes away.
 */
export class Upstream {
  private readonly pool: Pool
  private readonly prefix: string
  private readonly name: string

  constructor(options: UpstreamOptions) {
    this.name = options.name ?? 'the Messages API'
    const url = new URL(options.baseUrl)
    this.prefix = url.pathname.replace(/\/+$/, '')
    this.pool = new Pool(url.origin, {
      connections: options.connections,
      connectTimeout: Math.min(10_000, options.timeoutMs),
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 30_000
    })
  }

  /** `signal`: an AbortSignal, or an EventEmitter with `aborted` that emits 'abort' (undici takes either). */
  async send(path: string, headers: Record<string, string>, body: Buffer, signal: AbortSignal | EventEmitter): Promise<UpstreamResponse> {
    try {
      const res = await this.pool.request({ method: 'POST', path: `${this.prefix}${path}`, headers, body, signal })
      return { status: res.statusCode, headers: res.headers as Record<string, string | string[]>, body: res.body }
    } catch (err) {
      throw upstreamFault(err, this.name)
    }
  }

  /** A GET of the API (its model list), answered as it comes. */
  async get(path: string, headers: Record<string, string>, signal: AbortSignal): Promise<UpstreamResponse> {
    try {
      const res = await this.pool.request({ method: 'GET', path: `${this.prefix}${path}`, headers, signal })
      return { status: res.statusCode, headers: res.headers as Record<string, string | string[]>, body: res.body }
    } catch (err) {
      throw upstreamFault(err, this.name)
    }
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}

/** What a failed upstream call is answered with (an abort is passed on as it is: nobody is listening). */
export function upstreamFault(err: unknown, api = 'the Messages API'): unknown {
  if (err instanceof errors.RequestAbortedError || (err as { name?: string }).name === 'AbortError') return err
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError || err instanceof errors.ConnectTimeoutError) {
    return new UpstreamError('upstream_timeout', `${api} did not answer in time (COMPACT_UPSTREAM_TIMEOUT_MS)`, { cause: err })
  }
  const code = (err as { code?: string }).code
  return new UpstreamError('upstream_failed', `${api} could not be reached${code ? ` (${code})` : ''}`, { cause: err })
}
