import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ApiError } from './errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The name of the API key the request presented; empty without auth. */
    keyName: string
  }
}

/** Routes anyone may call, with no key and no rate limit: probes and the scrape. */
export const OPEN_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics'])

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

/** The key a request presents, as `Authorization: Bearer KEY` or `x-api-key: KEY`. */
function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization
  if (typeof header === 'string') {
    const m = /^Bearer\s+(.+)$/i.exec(header.trim())
    if (m) return m[1]!.trim()
  }
  const apiKey = request.headers['x-api-key']
  return typeof apiKey === 'string' && apiKey.trim() !== '' ? apiKey.trim() : undefined
}

/**
 * Checks every non-open route's key against the configured ones. Each comparison is of two SHA-256
 * digests with timingSafeEqual, and every key is compared, so timing tells nothing about which matched.
 */
export function installAuth(app: FastifyInstance, keys: ReadonlyMap<string, string>): void {
  app.decorateRequest('keyName', '')
  if (keys.size === 0) return
  const known = [...keys].map(([key, name]) => ({ digest: digest(key), name }))
  app.addHook('onRequest', async (request) => {
    if (OPEN_ROUTES.has(request.url.split('?')[0]!)) return
    const key = presentedKey(request)
    if (key === undefined) throw new ApiError(401, 'authentication_error', 'an API key is required: send Authorization: Bearer KEY or x-api-key: KEY')
    const presented = digest(key)
    let name: string | undefined
    for (const k of known) if (timingSafeEqual(presented, k.digest) && name === undefined) name = k.name
    if (name === undefined) throw new ApiError(401, 'authentication_error', 'invalid API key')
    request.keyName = name
  })
}
