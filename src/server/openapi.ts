import type { FastifyInstance } from 'fastify'

/**
 * The OpenAPI document is generated from the route schemas (one source of truth) by @fastify/swagger,
 * a development dependency: `npm run openapi` writes openapi.yaml, and a test fails when the committed
 * file and the routes drift apart. It must be registered before the routes.
 */
export async function registerOpenapi(app: FastifyInstance, version: string): Promise<void> {
  const { default: swagger } = await import('@fastify/swagger')
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'compaction-gateway',
        version,
        description:
          'Context compaction for coding agents. POST a history (Anthropic Messages format) to /v1/compact and get back a summary turn followed by the most recent turns, kept raw within a hard token bound, never splitting a tool call from its result.',
        license: { name: 'MIT', identifier: 'MIT' }
      },
      servers: [{ url: 'http://127.0.0.1:8080', description: 'the embedded defaults' }],
      components: {
        securitySchemes: {
          bearerKey: { type: 'http', scheme: 'bearer', description: 'An API key from COMPACT_API_KEYS, as Authorization: Bearer KEY' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'An API key from COMPACT_API_KEYS, as x-api-key: KEY' }
        }
      },
      tags: [
        { name: 'compaction', description: 'Compacting histories and the prompt that does it' },
        { name: 'proxy', description: 'The Messages API, proxied: point ANTHROPIC_BASE_URL at the gateway and get compaction with no code change' },
        { name: 'memory', description: "A session's cold layer: what compaction removed, searchable" },
        { name: 'health', description: 'Liveness and readiness' }
      ]
    },
    refResolver: {
      // Shared schemas keep their names in components.schemas.
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`)
    }
  })
}
