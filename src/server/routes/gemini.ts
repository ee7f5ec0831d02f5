import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify'
import { checkedWhenRead } from '../json.js'
import { Type } from 'typebox'
import { ConfigurationError, NotFoundError } from '../../contract/errors.js'
import type { GeminiHistory } from '../../proxy/gemini.js'
import { GenerateContentBody } from '../../contract/proxy-bodies.js'
import { clientHeaders, upstreamHeaders } from '../../proxy/upstream.js'
import { type ProxiedApi, abortOnClose, installProxyHooks, proxyErrors, proxyHeaders, proxyRequest, upstreamAnswer } from '../proxy/forward.js'
import { KEYED, keyedResponses } from './security.js'
import { geminiDialect, geminiMethod, inGeminiErrorShape, withoutKey } from '../../proxy/dialects/gemini.js'

/**
 * The gateway's own refusals in Gemini's error shape (the dialect's), as Google's SDK and Gemini CLI read them;
 * the upstream's pass as they came.
 */
const inGeminiShape: onSendHookHandler = (_request, reply, payload, done) => {
  if (reply.statusCode < 400 || typeof payload !== 'string' || !payload.startsWith('{"type":"error"')) return done(null, payload)
  try {
    const { error } = JSON.parse(payload) as { error: { message: string; path?: string } }
    done(null, inGeminiErrorShape(reply.statusCode, error))
  } catch {
    done(null, payload)
  }
}

/** The contract of `POST /v1beta/models/{model}:{method}`; its body checked when it is read. */
const GENERATE_SCHEMA = {
  schema: {
    tags: ['proxy'],
    operationId: 'geminiGenerateContent',
    summary:
      "Gemini's generateContent, streamGenerateContent and countTokens, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives",
    security: KEYED,
    params: Type.Object({
      model: Type.String({ description: 'The model and its method: `gemini-2.5-pro:generateContent`, `…:streamGenerateContent`, `…:countTokens`.' })
    }),
    headers: proxyHeaders("the session id the agent sends, else a stable id of the gateway's for the conversation"),
    body: GenerateContentBody,
    response: {
      200: upstreamAnswer(
        "The answer, as Gemini's API gave it (`text/event-stream` for `alt=sse`), with `x-compaction: none|compacted`, `x-compaction-summary-id`, and `x-compaction-recall-tool` where the gateway added its recall tool to the request (its calls are answered by the gateway and never reach the client)."
      ),
      ...proxyErrors(
        'The body is not a Gemini request the gateway can read while it may be over the budget, or its history breaks the rules of a conversation; `error.path` names the place.',
        { name: "Gemini's API", failures: '' }
      )
    }
  },
  validatorCompiler: checkedWhenRead
} as const

/**
 * Gemini's API as a drop-in proxy: `POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent`
 * (`alt=sse`) and `:countTokens`, compacted past the budget as the other proxies are (the same compactor,
 * anchors, records and cold layer), forwarded byte for byte under it; `GET /v1beta/models[/{model}]` passed
 * on. The key as Gemini takes it: `x-goog-api-key`, or `key` in the query.
 */
export const geminiRoutes: FastifyPluginAsync = async (app) => {
  const options = app.proxy.policy.gemini
  const { credentials } = options
  const upstream = app.proxy.gemini
  installProxyHooks(app, () => 'gemini_generate')
  app.addHook('onSend', inGeminiShape)
  app.post('/v1beta/models/:model', GENERATE_SCHEMA, async (request, reply) => {
    const { model, method, endpoint } = geminiMethod((request.params as { model: string }).model)
    if (!endpoint)
      throw new NotFoundError(`no method "${method}" of models here: the gateway serves generateContent, streamGenerateContent and countTokens`, '/model')
    const api: ProxiedApi<GeminiHistory> = {
      ...geminiDialect(model, endpoint),
      path: `/v1beta/models/${encodeURIComponent(model)}:${method}`,
      keySetting: 'GEMINI_API_KEY',
      upstream,
      credentials,
      query: withoutKey
    }
    return proxyRequest(app, options, api, request, reply)
  })
  async function forward(request: FastifyRequest, reply: FastifyReply, below: string): Promise<FastifyReply> {
    const given = credentials(request)
    if (!given) throw new ConfigurationError("the gateway has no key for Gemini's API: set GEMINI_API_KEY on the gateway")
    const abort = abortOnClose(reply)
    const res = await upstream.get(`/v1beta/models${below}${withoutKey(request.url)}`, upstreamHeaders(request.headers, given), abort.signal)
    return reply.code(res.status).headers(clientHeaders(res.headers)).send(res.body)
  }
  const answers = { ...keyedResponses(), 200: upstreamAnswer("The list (or the model), as Gemini's API gave it.") }
  app.get(
    '/v1beta/models',
    { schema: { tags: ['proxy'], operationId: 'geminiListModels', summary: "Gemini's models, proxied", security: KEYED, response: answers } },
    async (request, reply) => forward(request, reply, '')
  )
  app.get(
    '/v1beta/models/:model',
    {
      schema: {
        tags: ['proxy'],
        operationId: 'geminiGetModel',
        summary: "One of Gemini's models, proxied",
        security: KEYED,
        params: Type.Object({ model: Type.String() }),
        response: answers
      }
    },
    async (request, reply) => forward(request, reply, `/${encodeURIComponent((request.params as { model: string }).model)}`)
  )
}
