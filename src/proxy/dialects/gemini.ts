/**
 * Gemini's API's dialect: `contents` read into the core's turns and given back as Gemini's own contents
 * (pairs of calls and responses, thought signatures where they were), its usage metadata billed, the
 * gateway's recall tool offered as a function declaration and its exchanges put back in the client's
 * contents, summaries by the conversation's own model.
 */
import { settable } from '../../formats/index.js'
import { withMessages } from '../../contract/wire.js'
import { ProxiedBody } from '../body.js'
import { geminiClientSummarizer } from '../client-summaries.js'
import type { ProxiedDialect } from '../dialect.js'
import { type GeminiHistory, geminiPayload, readGeminiRequest } from '../gemini.js'
import { GEMINI_RECALL_TOOL_DEFINITION, type GeminiExchange, restoreGemini } from '../recall-gemini.js'
import { withRecallToolBytes } from '../recall-tool.js'

/** The dialect of `model`'s method counted as `endpoint` (gemini_generate, gemini_stream, gemini_count_tokens). */
export function geminiDialect(model: string, endpoint: string): ProxiedDialect<GeminiHistory> {
  return {
    endpoint,
    name: "Gemini's API",
    read: (body, budgetMayPass) => {
      const read = readGeminiRequest(body.value('contents'), budgetMayPass)
      return read.kind === 'unread' ? { unread: read.reason } : { parts: read.history, read: read.history }
    },
    write: (body, history, outcome, cleared, offerRecall) => {
      const bytes = geminiPayload(body.value() as object, history, outcome, cleared)
      return offerRecall ? withRecallToolBytes(bytes, GEMINI_RECALL_TOOL_DEFINITION) : bytes
    },
    // the gateway's recall tool: its exchanges put back in the client's own contents
    recallTool: 'gemini',
    // a generation bills (a token count does not): its usage metadata enters the session's cost; the
    // conversation's own model writes its summaries in the conversation (COMPACT_PROXY_SUMMARIES)
    ...(endpoint === 'gemini_count_tokens'
      ? {}
      : {
          usage: 'gemini' as const,
          clientSummarizer: (settings, _body, _history, headers, after, forwarded) =>
            geminiClientSummarizer(settings, { after, forwarded: () => forwardedContents(forwarded()) }, model, headers)
        }),
    answerAt: (history) => history.items.length,
    restoreItems: (body, history, exchanges) => {
      const { items, restored } = restoreGemini(history.items, exchanges as GeminiExchange[])
      return restored === 0 ? undefined : new ProxiedBody(withMessages(body.value() as object, items, 'contents'))
    },
    fixed: (history, message, block) => !settable(history.adapted, message, block),
    place: (history, path) => path.replace(/^\/messages\/(\d+).*/, (_m, i: string) => `/contents/${history.adapted.starts[Number(i)] ?? i}`)
  }
}

/** The body a request was forwarded as, and where each of its messages starts among its contents (read again from the bytes sent). */
function forwardedContents(bytes: Buffer | undefined): { body: Record<string, unknown>; starts: readonly number[] } | undefined {
  if (!bytes) return undefined
  const body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>
  const read = readGeminiRequest(body, () => true)
  return { body, starts: read.kind === 'history' ? read.history.adapted.starts : [] }
}

/** The methods of a model the proxy serves, and the endpoint each is counted under. */
const METHODS: Record<string, string> = { generateContent: 'gemini_generate', streamGenerateContent: 'gemini_stream', countTokens: 'gemini_count_tokens' }

/**
 * A model's method as its path names it (`gemini-2.5-pro:streamGenerateContent`): the model, the method, and
 * the endpoint it is counted under (undefined where the gateway serves no such method, or no model is named).
 */
export function geminiMethod(target: string): { model: string; method: string; endpoint: string | undefined } {
  const colon = target.lastIndexOf(':')
  const model = colon < 0 ? target : target.slice(0, colon)
  const method = colon < 0 ? '' : target.slice(colon + 1)
  return { model, method, endpoint: Object.hasOwn(METHODS, method) && model !== '' ? METHODS[method] : undefined }
}

/** A request's query without the client's `key` (the key goes as a header, the gateway's where it has one). */
export function withoutKey(url: string): string {
  const at = url.indexOf('?')
  if (at < 0) return ''
  const params = new URLSearchParams(url.slice(at + 1))
  params.delete('key')
  const rest = params.toString()
  return rest === '' ? '' : `?${rest}`
}

/** The status names of Google's APIs, by HTTP status. */
const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  408: 'DEADLINE_EXCEEDED',
  409: 'ABORTED',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED'
}

/**
 * One of the gateway's own refusals in Gemini's error shape, as Google's SDK and Gemini CLI read them:
 * `{error: {code, message, status}}`, the place named in the message.
 */
export function inGeminiErrorShape(status: number, error: { message: string; path?: string }): string {
  const message = error.path ? `${error.message} (at ${error.path})` : error.message
  return JSON.stringify({ error: { code: status, message, status: GOOGLE_STATUS[status] ?? (status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT') } })
}
