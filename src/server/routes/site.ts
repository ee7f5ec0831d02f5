import { readFileSync } from 'node:fs'
import type { FastifyPluginAsync } from 'fastify'
import { Type } from 'typebox'
import { NotFoundError } from '../../contract/errors.js'
import { OPEN, openResponses } from './security.js'

/** The contract as committed beside package.json (in the image too); undefined where it is not. */
export function readContract(): string | undefined {
  try {
    return readFileSync(new URL('../../../openapi.yaml', import.meta.url), 'utf8')
  } catch {
    return undefined
  }
}

function landingPage(version: string, contract: boolean): string {
  const link = (href: string, text: string, what: string): string => `<li><a href="${href}">${text}</a>: ${what}</li>`
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>compaction-gateway</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}code{background:#f2f2f2;padding:0 .25rem}</style></head>
<body>
<main>
<h1>compaction-gateway <small>${version}</small></h1>
<p>Context compaction for coding agents. An agent whose prompt grows too big POSTs its history to <code>/v1/compact</code>,
or points its base URL here (<code>ANTHROPIC_BASE_URL</code>) and is compacted past its budget with no code change: the
newest turns stay raw within a hard token bound, a tool call is never split from its result, and the older turns become one
summary turn written under a prompt this service owns.</p>
<ul>
${link('/ui/', 'Sessions', "your sessions in a web page: each one's prompt before and after every compaction, its summaries, a search of what was removed, deletion (sign in with a gateway key)")}
${contract ? link('/openapi.yaml', 'openapi.yaml', 'the API contract (OpenAPI 3.1)') : ''}
${link('/v1/doctrine', '/v1/doctrine', 'the prompt summaries are written under (with a key where keys are set)')}
${link('/metrics', '/metrics', 'Prometheus metrics')}
${link('/healthz', '/healthz', 'liveness')} ${link('/readyz', '/readyz', 'readiness')}
</ul>
</main>
</body>
</html>
`
}

/** The service's front door, open to all: what it is and where its contract and metrics are; the contract itself. */
export const siteRoutes: FastifyPluginAsync<{ version: string; contract: string | undefined }> = async (app, { version, contract }) => {
  const page = landingPage(version, contract !== undefined)
  app.get(
    '/',
    {
      schema: {
        tags: ['health'],
        operationId: 'getLandingPage',
        summary: 'What the service is, with links to its contract, prompt and metrics',
        security: OPEN,
        response: { 200: { description: 'An HTML page', content: { 'text/html': { schema: { type: 'string' } } } }, ...openResponses() }
      }
    },
    async (_request, reply) => reply.type('text/html; charset=utf-8').send(page)
  )
  app.get(
    '/openapi.yaml',
    {
      schema: {
        tags: ['health'],
        operationId: 'getContract',
        summary: 'This API contract (OpenAPI 3.1, YAML)',
        security: OPEN,
        response: {
          200: { description: 'The contract', content: { 'application/yaml': { schema: { type: 'string' } } } },
          404: Type.Ref('ErrorResponse', { description: 'The contract is not beside the service (a build without openapi.yaml).' }),
          ...openResponses()
        }
      }
    },
    async (_request, reply) => {
      if (contract === undefined) throw new NotFoundError('openapi.yaml is not beside this build')
      return reply.type('application/yaml; charset=utf-8').send(contract)
    }
  )
}
