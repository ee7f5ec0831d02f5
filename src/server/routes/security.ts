import { Type } from 'typebox'

/** The OpenAPI security of routes behind the API keys (enforced only when COMPACT_API_KEYS is set). */
export const KEYED: { [scheme: string]: string[] }[] = [{ bearerKey: [] }, { apiKeyHeader: [] }]

/** What such a route answers without the right key. */
export const UNAUTHORIZED_DESCRIPTION = 'No API key, or a wrong one.'
export const unauthorizedResponse = () => Type.Ref('ErrorResponse', { description: UNAUTHORIZED_DESCRIPTION })
