import type { FastifyPluginAsync } from 'fastify'
import { checkedWhenRead } from '../json.js'
import type { OpenAiApi, OpenAiBody, OpenAiHistory } from '../../proxy/openai.js'
import { ChatCompletionsBody, ResponsesBody, ResponsesCompactBody } from '../../contract/proxy-bodies.js'
import { bodyReader } from '../../contract/validation.js'
import { type ProxiedApi, compactResponsesHere, installProxyHooks, proxyErrors, proxyHeaders, proxyRequest, upstreamAnswer } from '../proxy/forward.js'
import { KEYED } from './security.js'
import { openAiDialect, responsesCompactionModel } from '../../proxy/dialects/openai.js'

/** The proxied endpoints: the path below OPENAI_BASE_URL upstream, below /v1 here. */
const ENDPOINTS = [
  {
    api: 'chat',
    endpoint: 'chat_completions',
    path: '/chat/completions',
    operationId: 'createChatCompletion',
    summary: 'Chat Completions, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives',
    body: ChatCompletionsBody
  },
  {
    api: 'responses',
    endpoint: 'responses',
    path: '/responses',
    operationId: 'createResponse',
    summary: 'The Responses API, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives',
    body: ResponsesBody
  },
  {
    // The agent's own compaction (Codex's remote /compact): the upstream compacts the history it is sent, and
    // a history past the budget is the gateway's compacted one, as for /v1/responses (the upstream could not
    // take more in a request either).
    api: 'responses',
    endpoint: 'responses_compact',
    path: '/responses/compact',
    operationId: 'compactResponseInput',
    summary: "The Responses API's own compaction, proxied: the input compacted past the budget as for /v1/responses, forwarded byte for byte under it",
    body: ResponsesCompactBody
  }
] as const

/**
 * POST /v1/chat/completions, /v1/responses and /v1/responses/compact: OpenAI's APIs, proxied to OPENAI_BASE_URL as /v1/messages
 * proxies the Messages API (the same compactor, anchors, records and cold layer); the history is read into
 * the core's turns and given back as the client's own items.
 */
export const openAiRoutes: FastifyPluginAsync = async (app) => {
  const options = app.proxy.policy.openai
  const { credentials } = options
  // OPENAI_BASE_URL, read as the openai SDK reads it (`/v1` included)
  const upstream = app.proxy.openai
  installProxyHooks(app, (url) => ENDPOINTS.find((e) => `/v1${e.path}` === url)?.endpoint ?? 'chat_completions')
  for (const route of ENDPOINTS) {
    const kind: OpenAiApi = route.api
    // the route's schema, the one check of the bodies it reads
    const check = bodyReader<OpenAiBody>(route.body)
    // the Responses API's own compaction, where the gateway answers it: its summary by the conversation's own model
    const compactionModel = responsesCompactionModel(options.clientSummaries, check)
    const api: ProxiedApi<OpenAiHistory> = {
      ...openAiDialect(kind, route.endpoint, check),
      path: route.path,
      keySetting: 'OPENAI_API_KEY',
      upstream,
      credentials
    }
    // The body stays bytes until the proxy reads it (one under its budget is forwarded unread); what it reads
    // is checked then, against this same schema (`check`).
    app.post(
      `/v1${route.path}`,
      routeSchema(route),
      // the Responses API's own compaction, answered by the gateway where the upstream has none (COMPACT_CONTEXT_MANAGEMENT)
      route.endpoint === 'responses_compact' && options.contextManagement === 'gateway'
        ? async (request, reply) => compactResponsesHere(app, request, reply, compactionModel)
        : async (request, reply) => proxyRequest(app, options, api, request, reply)
    )
  }
}

/** The contract of one proxied endpoint (its body checked when it is read, against the same schema). */
function routeSchema(route: (typeof ENDPOINTS)[number]) {
  return {
    schema: {
      tags: ['proxy'],
      operationId: route.operationId,
      summary: route.summary,
      security: KEYED,
      headers: proxyHeaders('the session id the agent sends (x-session-id, x-session-affinity, session-id, thread-id…), else prompt_cache_key'),
      body: route.body,
      response: {
        200: upstreamAnswer(
          'The answer, as the OpenAI-compatible API gave it (status, headers and body; `text/event-stream` for `stream: true`), with `x-compaction: none|compacted`, `x-compaction-summary-id`, `x-compaction-not-read` (previous_response_id, conversation, single_input, history_not_read) where the history could not be read, and `x-compaction-recall-tool` where the gateway added its recall tool to the request (its calls are answered by the gateway and never reach the client).'
        ),
        ...proxyErrors(
          'The body is not a request the gateway can read while it may be over the budget, or its history breaks the rules of a conversation; `error.path` names the place.',
          {
            name: 'The upstream',
            failures: ''
          }
        )
      }
    },
    validatorCompiler: checkedWhenRead
  }
}
