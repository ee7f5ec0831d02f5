import type { FastifyPluginAsync } from 'fastify'
import { Type } from 'typebox'
import { openAiClientSummarizer } from '../../proxy/client-summaries.js'
import { type OpenAiApi, type OpenAiHistory, openAiPayload, readOpenAiRequest } from '../../proxy/openai.js'
import { settable } from '../../formats/index.js'
import {
  type ProxiedApi,
  type ProxyRead,
  compactResponsesHere,
  installProxyHooks,
  proxyErrors,
  proxyHeaders,
  proxyRequest,
  upstreamAnswer
} from '../proxying.js'
import { KEYED } from './security.js'

/** What both Responses endpoints read: the history (`input`), where it may be held upstream instead, and the session. */
const RESPONSES_HISTORY = {
  model: Type.String(),
  input: Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.Object({}, { additionalProperties: true }))], {
      description:
        'Leading system and developer items (of any type) are the system prompt; calls and their outputs are paired by `call_id`, reasoning items stay with their turn, items of types the gateway does not know pass untouched. A string is one message: never compacted.'
    })
  ),
  instructions: Type.Optional(Type.String()),
  previous_response_id: Type.Optional(
    Type.String({ description: 'The history is held upstream: the request is forwarded unread (`x-compaction-not-read: previous_response_id`).' })
  ),
  prompt_cache_key: Type.Optional(Type.String({ description: 'Names the session when no session header does (Codex sends its thread id).' }))
}

/** The proxied endpoints: the path below OPENAI_BASE_URL upstream, below /v1 here. */
const ENDPOINTS = [
  {
    api: 'chat',
    endpoint: 'chat_completions',
    path: '/chat/completions',
    operationId: 'createChatCompletion',
    summary: 'Chat Completions, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives',
    body: Type.Object(
      {
        model: Type.String(),
        messages: Type.Array(Type.Object({ role: Type.String() }, { additionalProperties: true }), {
          description:
            'Leading system and developer messages are the system prompt (counted, sent as they came); the rest may be compacted into one user message that carries the summary.'
        }),
        tools: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }))),
        stream: Type.Optional(Type.Boolean()),
        prompt_cache_key: Type.Optional(Type.String({ description: 'Names the session when no session header does.' }))
      },
      {
        additionalProperties: true,
        description:
          'A Chat Completions request, as the OpenAI SDKs send it. Every field passes upstream unchanged, but for `messages` when they are compacted.'
      }
    )
  },
  {
    api: 'responses',
    endpoint: 'responses',
    path: '/responses',
    operationId: 'createResponse',
    summary: 'The Responses API, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives',
    body: Type.Object(
      {
        ...RESPONSES_HISTORY,
        conversation: Type.Optional(
          Type.Unknown({ description: 'The history is held upstream: the request is forwarded unread (`x-compaction-not-read: conversation`).' })
        ),
        tools: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }))),
        stream: Type.Optional(Type.Boolean())
      },
      {
        additionalProperties: true,
        description:
          'A Responses API request, as the OpenAI SDKs and Codex send it. Every field passes upstream unchanged, but for `input` when it is compacted.'
      }
    )
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
    body: Type.Object(RESPONSES_HISTORY, {
      additionalProperties: true,
      description:
        "A compaction request of the Responses API (`client.responses.compact`, Codex's remote compaction). Every field passes upstream unchanged, but for `input` when it is compacted."
    })
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
    const api: ProxiedApi<OpenAiHistory> = {
      endpoint: route.endpoint,
      path: route.path,
      name: 'the OpenAI API',
      keySetting: 'OPENAI_API_KEY',
      upstream,
      credentials,
      read: (body, budgetMayPass): ProxyRead<OpenAiHistory> => {
        const read = readOpenAiRequest(body.value(kind === 'chat' ? 'messages' : 'input'), kind, budgetMayPass)
        return read.kind === 'unread' ? { unread: read.reason } : { parts: read.history, read: read.history }
      },
      write: (body, history, outcome, cleared) => openAiPayload(body.value() as object, history, outcome, cleared),
      fixed: (history, message, block) => !settable(history.adapted, message, block),
      // the client's own model writes summaries in its own conversation (not behind the upstream's own compaction)
      ...(route.endpoint === 'responses_compact'
        ? {}
        : {
            clientSummarizer: (settings, body, _history, headers, after, forwarded) => {
              const model = (body.value() as { model?: unknown }).model
              return openAiClientSummarizer(
                settings,
                { api: kind, after, forwarded: () => forwardedConversation(forwarded(), kind) },
                typeof model === 'string' ? model : 'unknown',
                headers
              )
            }
          }),
      ...(route.endpoint === 'responses' ? { responsesCompaction: true as const } : {}),
      // the core's message i is the turn that starts at the client's item starts[i]
      place: (history, path) => path.replace(/^\/messages\/(\d+).*/, (_m, i: string) => `/${history.field}/${history.adapted.starts[Number(i)] ?? i}`)
    }
    // The body is read by the proxy, not by a schema: the contract describes it, the upstream checks it.
    app.post(
      `/v1${route.path}`,
      {
        schema: {
          tags: ['proxy'],
          operationId: route.operationId,
          summary: route.summary,
          security: KEYED,
          headers: proxyHeaders('the session id the agent sends (x-session-id, x-session-affinity, session-id, thread-id…), else prompt_cache_key'),
          body: route.body,
          response: {
            200: upstreamAnswer(
              'The answer, as the OpenAI-compatible API gave it (status, headers and body; `text/event-stream` for `stream: true`), with `x-compaction: none|compacted`, `x-compaction-summary-id`, and `x-compaction-not-read` (previous_response_id, conversation, single_input, history_not_read) where the history could not be read.'
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
        validatorCompiler: () => () => true
      },
      // the Responses API's own compaction, answered by the gateway where the upstream has none (COMPACT_CONTEXT_MANAGEMENT)
      route.endpoint === 'responses_compact' && options.contextManagement === 'gateway'
        ? async (request, reply) => compactResponsesHere(app, request, reply)
        : async (request, reply) => proxyRequest(app, options, api, request, reply)
    )
  }
}

/** The body a request was forwarded as, and where each of its messages starts among its items (read again from the bytes sent). */
function forwardedConversation(bytes: Buffer | undefined, kind: OpenAiApi): { body: Record<string, unknown>; starts: readonly number[] } | undefined {
  if (!bytes) return undefined
  const body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>
  const read = readOpenAiRequest(body, kind, () => true)
  return { body, starts: read.kind === 'history' ? read.history.adapted.starts : [] }
}
