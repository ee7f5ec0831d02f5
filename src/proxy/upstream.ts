import type { IncomingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import { Pool, errors } from 'undici'
import { GatewayError } from '../contract/errors.js'

/** Where the gateway forwards Messages API requests, and with what credentials. */
export interface UpstreamOptions {
  /** The Messages API's base URL (ANTHROPIC_BASE_URL), a path prefix allowed. */
  baseUrl: string
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

/** The request headers an Anthropic client sends that mean something to the API, and nothing else. */
const FORWARDED_HEADER = /^(anthropic-(version|beta)|content-type|accept|user-agent|x-stainless-[a-z0-9-]+)$/

/** Headers of a single hop: never forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authenticate', 'proxy-authorization', 'content-length'])

/**
 * The headers sent upstream: the client's Messages API headers (anthropic-version, anthropic-beta…),
 * and the credentials given. The client's own x-api-key and Authorization are never among them unless
 * `credentials` says so; cookies, hosts and the gateway's own x-compaction-* headers never are.
 */
export function upstreamHeaders(incoming: IncomingHttpHeaders, credentials: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || !FORWARDED_HEADER.test(name)) continue
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

/** The upstream could not be reached or did not answer in time: 502 or 504, in the Messages API's error shape. */
export class UpstreamError extends GatewayError {}

/**
 * An HTTP client for the Messages API: a pool of kept-alive connections to one origin, timeouts fit for
 * a model that thinks for minutes and for streams that stay open as long (each bounds a silence, not the
 * whole answer), and cancellation that reaches the upstream when the client goes away.
 */
export class Upstream {
  private readonly pool: Pool
  private readonly prefix: string

  constructor(options: UpstreamOptions) {
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

  async send(path: string, headers: Record<string, string>, body: Buffer, signal: AbortSignal): Promise<UpstreamResponse> {
    try {
      const res = await this.pool.request({ method: 'POST', path: `${this.prefix}${path}`, headers, body, signal })
      return { status: res.statusCode, headers: res.headers as Record<string, string | string[]>, body: res.body }
    } catch (err) {
      throw upstreamFault(err)
    }
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}

/** What a failed upstream call is answered with (an abort is passed on as it is: nobody is listening). */
export function upstreamFault(err: unknown): unknown {
  if (err instanceof errors.RequestAbortedError || (err as { name?: string }).name === 'AbortError') return err
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError || err instanceof errors.ConnectTimeoutError) {
    return new UpstreamError(504, 'the Messages API did not answer in time (COMPACT_UPSTREAM_TIMEOUT_MS)', { type: 'timeout_error', cause: err })
  }
  const code = (err as { code?: string }).code
  return new UpstreamError(502, `the Messages API could not be reached${code ? ` (${code})` : ''}`, { type: 'api_error', cause: err })
}
