import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { ConfigurationError } from '../../contract/errors.js'
import { clientHeaders, upstreamHeaders } from '../../proxy/upstream.js'
import { abortOnClose, upstreamAnswer } from '../proxy/forward.js'
import { KEYED, keyedResponses } from './security.js'

const ANSWERS = {
  ...keyedResponses(),
  200: upstreamAnswer('The list (or the model), as the upstream gave it: status, headers and body.'),
  500: Type.Ref('ErrorResponse', { description: 'The gateway has no key for that API (ANTHROPIC_API_KEY or OPENAI_API_KEY); `x-should-retry: false`.' }),
  502: Type.Ref('ErrorResponse', { description: 'The upstream could not be reached.' }),
  504: Type.Ref('ErrorResponse', { description: 'The upstream did not begin to answer within COMPACT_UPSTREAM_TIMEOUT_MS.' }),
  '4XX': Type.Ref('ErrorResponse', { description: "The upstream's own refusals come back with their status, body and headers." }),
  '5XX': Type.Ref('ErrorResponse', { description: "The upstream's own failures come back with their status, body and headers." })
}

const WHICH = 'The Messages API when the request sends `anthropic-version` (as the Anthropic SDKs do), the OpenAI API otherwise.'

/** The header that says which API the client speaks. */
const HEADERS = Type.Object({
  'anthropic-version': Type.Optional(Type.String({ description: "Sent by the Anthropic SDKs: the Messages API's models; without it, the OpenAI API's." }))
})

/**
 * GET /v1/models and /v1/models/{model}: the models of the API the client speaks, asked of its upstream
 * with the gateway's credentials, so that a client pointed at the gateway lists them as it would there.
 * The two APIs share the path; the Anthropic SDKs always send `anthropic-version`, OpenAI's never do.
 */
export const modelsRoutes: FastifyPluginAsync = async (app) => {
  const { policy } = app.proxy
  async function forward(request: FastifyRequest, reply: FastifyReply, below: string): Promise<FastifyReply> {
    const anthropic = request.headers['anthropic-version'] !== undefined
    const credentials = (anthropic ? policy.messages : policy.openai).credentials(request)
    if (!credentials)
      throw new ConfigurationError(
        `the gateway has no key for ${anthropic ? 'the Messages API: set ANTHROPIC_API_KEY' : 'the OpenAI API: set OPENAI_API_KEY'} on the gateway`
      )
    // ANTHROPIC_BASE_URL is the origin (its paths start with /v1); OPENAI_BASE_URL ends with /v1
    const path = `${anthropic ? '/v1' : ''}/models${below}`
    const query = request.url.indexOf('?')
    const upstream = anthropic ? app.proxy.upstream : app.proxy.openai
    const abort = abortOnClose(reply)
    const res = await upstream.get(query < 0 ? path : `${path}${request.url.slice(query)}`, upstreamHeaders(request.headers, credentials), abort.signal)
    // the Messages API's models, where the gateway serves compaction on demand: said in their capabilities
    if (anthropic && policy.messages.contextManagement === 'gateway' && res.status === 200) {
      const chunks: Buffer[] = []
      for await (const chunk of res.body) chunks.push(chunk as Buffer)
      const text = Buffer.concat(chunks).toString('utf8')
      const headers = clientHeaders(res.headers)
      delete headers['content-length']
      return reply.code(200).headers(headers).send(withCompaction(text))
    }
    return reply.code(res.status).headers(clientHeaders(res.headers)).send(res.body)
  }

  app.get(
    '/v1/models',
    {
      schema: {
        tags: ['proxy'],
        operationId: 'listModels',
        summary: `The upstream's models, proxied. ${WHICH}`,
        security: KEYED,
        headers: HEADERS,
        response: ANSWERS
      }
    },
    async (request, reply) => forward(request, reply, '')
  )
  app.get(
    '/v1/models/:model',
    {
      schema: {
        tags: ['proxy'],
        operationId: 'getModel',
        summary: `One of the upstream's models, proxied. ${WHICH}`,
        security: KEYED,
        headers: HEADERS,
        params: Type.Object({ model: Type.String() }),
        response: ANSWERS
      }
    },
    async (request, reply) => forward(request, reply, `/${encodeURIComponent((request.params as { model: string }).model)}`)
  )
}

/** What the gateway adds to a model's capabilities: compaction on demand (`compaction: {type: "summarize"}`), which it answers itself. */
const COMPACTION_CAPABILITY = { supported: true, summarize: { supported: true } }

/** A model list's (or one model's) JSON with compaction on demand in each model's capabilities; anything else as it came. */
function withCompaction(text: string): string {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return text
  }
  const mark = (model: unknown): unknown => {
    if (typeof model !== 'object' || model === null || Array.isArray(model)) return model
    const own = model as Record<string, unknown>
    const capabilities = typeof own.capabilities === 'object' && own.capabilities !== null ? own.capabilities : {}
    return { ...own, capabilities: { ...capabilities, compaction: COMPACTION_CAPABILITY } }
  }
  if (typeof value !== 'object' || value === null) return text
  const list = value as { data?: unknown }
  return JSON.stringify(Array.isArray(list.data) ? { ...list, data: list.data.map(mark) } : mark(value))
}
