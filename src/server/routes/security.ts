/** The OpenAPI security of routes behind the API keys (enforced only when COMPACT_API_KEYS is set). */
export const KEYED: { [scheme: string]: string[] }[] = [{ bearerKey: [] }, { apiKeyHeader: [] }]
