/**
 * The dialect of OpenAI's APIs, Chat Completions and the Responses API (and the Responses API's own
 * compaction): the body read into the core's turns and given back as the client's own items, its usage
 * billed, the gateway's recall tool offered in its format and its exchanges put back in the client's items,
 * the Responses API's compaction performed by the gateway, summaries by the conversation's own model.
 */
import type { Message } from '../../compaction/index.js'
import type { Summarizer } from '../../summarizer/summarizer.js'
import { settable } from '../../formats/index.js'
import type { BodyRead } from '../../contract/validation.js'
import { withMessages } from '../../contract/wire.js'
import { ProxiedBody } from '../body.js'
import { type ClientSummaries, openAiClientSummarizer } from '../client-summaries.js'
import type { ProxiedDialect, ProxyRead } from '../dialect.js'
import { type OpenAiApi, type OpenAiBody, type OpenAiHistory, openAiPayload, readOpenAiRequest } from '../openai.js'
import { type ChatExchange, restoreChat } from '../recall-chat.js'
import { RESPONSES_RECALL_TOOL_DEFINITION, type ResponsesExchange, restoreResponses } from '../recall-responses.js'
import { CHAT_RECALL_TOOL_DEFINITION, type StoredExchange, withRecallToolBytes } from '../recall-tool.js'

/** `check`: the route's schema, the one check of the bodies it reads. */
export function openAiDialect(
  kind: OpenAiApi,
  endpoint: 'chat_completions' | 'responses' | 'responses_compact',
  check: (body: unknown) => BodyRead<OpenAiBody>
): ProxiedDialect<OpenAiHistory> {
  return {
    endpoint,
    name: 'the OpenAI API',
    read: (body, budgetMayPass): ProxyRead<OpenAiHistory> => {
      const read = readOpenAiRequest(body.value(kind === 'chat' ? 'messages' : 'input'), kind, budgetMayPass, check)
      return read.kind === 'unread' ? { unread: read.reason } : { parts: read.history, read: read.history }
    },
    write: (body, history, outcome, cleared, offerRecall) => {
      const bytes = openAiPayload(body.value() as object, history, outcome, cleared)
      if (!offerRecall) return bytes
      return withRecallToolBytes(bytes, kind === 'chat' ? CHAT_RECALL_TOOL_DEFINITION : RESPONSES_RECALL_TOOL_DEFINITION)
    },
    // the gateway's recall tool: its exchanges put back in the client's own items (not on the upstream's own compaction)
    ...(endpoint === 'responses_compact'
      ? {}
      : {
          recallTool: kind,
          answerAt: (history: OpenAiHistory) => history.items.length,
          restoreItems: (body: ProxiedBody, history: OpenAiHistory, exchanges: readonly StoredExchange[]) => {
            const { items, restored } =
              kind === 'chat' ? restoreChat(history.items, exchanges as ChatExchange[]) : restoreResponses(history.items, exchanges as ResponsesExchange[])
            return restored === 0 ? undefined : new ProxiedBody(withMessages(body.value() as object, items, history.field))
          },
          // Codex declares its tools in `additional_tools` input items
          declaredTools: (history: OpenAiHistory) => history.items.filter((i) => i.type === 'additional_tools')
        }),
    fixed: (history, message, block) => !settable(history.adapted, message, block),
    // the conversation's own model writes its summaries in the conversation (not behind the upstream's own compaction)
    ...(endpoint === 'responses_compact'
      ? {}
      : {
          clientSummarizer: (settings, body, _history, headers, after, forwarded) =>
            conversationModel(settings, kind, check, { body, headers, after, forwarded })
        }),
    ...(endpoint === 'responses' ? { responsesCompaction: true as const } : {}),
    // every answer bills: its usage, read into the Messages API's terms, enters the session's cost
    usage: kind === 'chat' ? ('chat' as const) : ('responses' as const),
    // the core's message i is the turn that starts at the client's item starts[i]
    place: (history, path) => path.replace(/^\/messages\/(\d+).*/, (_m, i: string) => `/${history.field}/${history.adapted.starts[Number(i)] ?? i}`)
  }
}

/**
 * The Responses API's own compaction (`/v1/responses/compact`) answered by the gateway: its summary written by the
 * conversation's own model (COMPACT_PROXY_SUMMARIES), asked in the conversation as the client sent it, with the
 * headers it is forwarded with; none where the operator keeps summaries to the gateway's model (`settings` unset).
 */
export function responsesCompactionModel(
  settings: ClientSummaries | undefined,
  check: (body: unknown) => BodyRead<OpenAiBody>
): ((body: ProxiedBody, headers: Record<string, string>) => ((messages: Message[]) => Summarizer) | undefined) | undefined {
  if (!settings) return undefined
  return (body, headers) => conversationModel(settings, 'responses', check, { body, headers, after: Promise.resolve(), forwarded: () => body.bytes })
}

/**
 * The conversation's own model, asked in the conversation as it was forwarded (`forwarded`: its bytes once sent,
 * `after` the upstream has begun to answer them), with the headers it is forwarded with.
 */
function conversationModel(
  settings: ClientSummaries,
  kind: OpenAiApi,
  check: (body: unknown) => BodyRead<OpenAiBody>,
  sent: { body: ProxiedBody; headers: Record<string, string>; after: Promise<unknown>; forwarded: () => Buffer | undefined }
): (messages: Message[]) => Summarizer {
  const model = (sent.body.value(kind === 'chat' ? 'messages' : 'input') as { model?: unknown }).model
  return openAiClientSummarizer(
    settings,
    { api: kind, after: sent.after, forwarded: () => forwardedConversation(sent.forwarded(), kind, check) },
    typeof model === 'string' ? model : 'unknown',
    sent.headers
  )
}

/** The body a request was forwarded as, and where each of its messages starts among its items (read again from the bytes sent). */
export function forwardedConversation(
  bytes: Buffer | undefined,
  kind: OpenAiApi,
  check: (body: unknown) => BodyRead<OpenAiBody>
): { body: Record<string, unknown>; starts: readonly number[] } | undefined {
  if (!bytes) return undefined
  const body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>
  const read = readOpenAiRequest(body, kind, () => true, check)
  return { body, starts: read.kind === 'history' ? read.history.adapted.starts : [] }
}
