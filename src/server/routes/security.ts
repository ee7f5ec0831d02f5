import { Type } from 'typebox'

/** The OpenAPI security of routes behind the API keys (enforced only when COMPACT_API_KEYS is set). */
export const KEYED: { [scheme: string]: string[] }[] = [{ bearerKey: [] }, { apiKeyHeader: [] }]

/** What such a route answers without the right key. */
export const UNAUTHORIZED_DESCRIPTION = 'No API key, or a wrong one.'
export const unauthorizedResponse = () => Type.Ref('ErrorResponse', { description: UNAUTHORIZED_DESCRIPTION })

/** Open routes (probes, the scrape): declared with no security, as they need none. */
export const OPEN: { [scheme: string]: string[] }[] = []

/** What every keyed route can answer besides its own statuses: no or a wrong key, and the rate limit. */
export const keyedResponses = () => ({
  401: unauthorizedResponse(),
  429: Type.Ref('ErrorResponse', { description: 'Rate limited (per key, or per address after failed authentications); retry after the Retry-After header.' })
})

/** What an open route can answer when the request itself cannot be read (a bad URL, a wrong method). */
export const openResponses = () => ({
  '4XX': Type.Ref('ErrorResponse', { description: 'A request the server cannot serve: a bad URL, a wrong method, headers too large.' })
})
