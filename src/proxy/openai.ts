/**
 * Proxied requests of OpenAI's APIs (Chat Completions, Responses): their history read into the core's turns
 * (formats/), so that the proxy's compactor works on them as on a Messages API history, and the compacted
 * history given back as the client's own items.
 */
import type { Block, HistoryProblem } from '../compaction/index.js'
import { InvalidRequestError } from '../contract/errors.js'
import { ChatCompletionsBody, ResponsesBody } from '../contract/proxy-bodies.js'
import { type BodyRead, bodyReader } from '../contract/validation.js'
import { type ItemsField, withMessages } from '../contract/wire.js'
import { type Adapted, adaptHistory, givenBack, rulesOf, withCleared } from '../formats/index.js'
import type { FormatRules } from '../formats/history.js'
import type { ForwardedTail } from './anchors.js'
import type { ProxyParts } from './request.js'

export type OpenAiApi = 'chat' | 'responses'

/** An OpenAI request whose history the proxy read: the parts its compactor needs, and the way back to the client's items. */
export interface OpenAiHistory extends ProxyParts {
  field: ItemsField
  items: Record<string, unknown>[]
  adapted: Adapted
  rules: FormatRules
}

/** A request the proxy reads, or one it forwards unread, and why. */
export type OpenAiRead = { kind: 'history'; history: OpenAiHistory } | { kind: 'unread'; reason: OpenAiUnread }

/**
 * Why a request is forwarded as it came: its history is held upstream (a Responses `previous_response_id`
 * or `conversation`: the gateway cannot see it, so cannot compact it), it is one message (a string `input`),
 * or its items do not read as a history and it is under the budget (the upstream judges what it refuses).
 */
export type OpenAiUnread = 'previous_response_id' | 'conversation' | 'single_input' | 'history_not_read'

function invalid(message: string, path: string): InvalidRequestError {
  return new InvalidRequestError(message, path)
}

/** A problem the format's reader found, at its place in this body (the Responses API's history is its `input`). */
function problemIn(field: ItemsField, problem: HistoryProblem): InvalidRequestError {
  if (field === 'messages') return invalid(problem.message, problem.path)
  return invalid(problem.message.replace(/^messages\[/, 'input['), problem.path.replace(/^\/messages/, '/input'))
}

/** What the readers take of an OpenAI body, whichever of its routes' schemas (contract/proxy-bodies.ts) it was checked against. */
export type OpenAiBody = Partial<ChatCompletionsBody> & Partial<ResponsesBody>

/** Each API's body as its main route's schema says it (a route passes the check of its own schema). */
const API_CHECKS: Record<OpenAiApi, (body: unknown) => BodyRead<OpenAiBody>> = {
  chat: bodyReader<OpenAiBody>(ChatCompletionsBody),
  responses: bodyReader<OpenAiBody>(ResponsesBody)
}

/**
 * Reads what compaction needs from a Chat Completions or Responses body, checked by its route's schema
 * (`check`): its history as the core's turns, its system prompt (leading system and developer items, and
 * the Responses `instructions`) and tools, for the estimate. A body whose items cannot be read is refused
 * (400, naming the place) where it may be over the budget (`budgetMayPass`); under it nothing would be done
 * to it, and it goes on for the upstream to judge.
 */
export function readOpenAiRequest(
  body: unknown,
  api: OpenAiApi,
  budgetMayPass: () => boolean,
  check: (body: unknown) => BodyRead<OpenAiBody> = API_CHECKS[api]
): OpenAiRead {
  const checked = check(body)
  if (!checked.ok) throw invalid(checked.message, checked.path ?? '/')
  const read = checked.value
  const field: ItemsField = api === 'chat' ? 'messages' : 'input'
  if (api === 'responses') {
    if (read.previous_response_id !== undefined && read.previous_response_id !== null) return { kind: 'unread', reason: 'previous_response_id' }
    if (read.conversation !== undefined && read.conversation !== null) return { kind: 'unread', reason: 'conversation' }
    if (typeof read.input === 'string') return { kind: 'unread', reason: 'single_input' }
  }
  const items = read[field]
  // (the Chat Completions schema requires its messages; the Responses one leaves `input` out where the history is held upstream)
  if (!Array.isArray(items)) throw invalid(`body needs the field \`${field}\``, '/')
  const rules = rulesOf(api === 'chat' ? 'openai-chat' : 'openai-responses')
  const adapted = adaptHistory(items as Record<string, unknown>[], rules)
  if ('kind' in adapted) {
    if (!budgetMayPass()) return { kind: 'unread', reason: 'history_not_read' }
    throw problemIn(field, adapted)
  }
  const { tools, instructions, prompt_cache_key: cacheKey } = read
  const texts = [typeof instructions === 'string' ? instructions : '', adapted.systemText].filter((t) => t !== '')
  const system: Block[] = texts.map((text) => ({ type: 'text', text }))
  return {
    kind: 'history',
    history: {
      field,
      items: items as Record<string, unknown>[],
      adapted,
      rules,
      messages: adapted.messages,
      ...(system.length > 0 ? { system } : {}),
      ...(tools !== undefined ? { tools: tools as ProxyParts['tools'] } : {}),
      // the conversation's cache key (Codex sends its thread's id): the session when no header names one
      ...(typeof cacheKey === 'string' && cacheKey !== '' ? { userId: cacheKey } : {})
    }
  }
}

/** The body to forward: the client's own items, from the first kept one, behind its system items and the summary item. */
export function openAiPayload(
  body: object,
  history: OpenAiHistory,
  forwarded: ({ messages: ProxyParts['messages'] } & ForwardedTail) | undefined,
  cleared?: ClearedHistory
): Buffer {
  // results the proxy cleared first are placeholders in the client's own items, summarized or not
  const items = cleared ? withCleared(history.items, history.adapted, cleared.messages, cleared.uses) : history.items
  if (!forwarded) return withMessages(body, items, history.field)
  const given = givenBack(items, history.adapted, history.rules, { messages: forwarded.messages, kept_from: forwarded.keptFrom, clips: forwarded.clips })
  return withMessages(body, given.items, history.field)
}

/** A history whose old tool results the proxy cleared (clearing.ts): the core's messages with them cleared, and where each is. */
export interface ClearedHistory {
  messages: ProxyParts['messages']
  uses: readonly { message: number; block: number }[]
}
