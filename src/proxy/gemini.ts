/**
 * Gemini's API as the proxy reads it: a `generateContent` body's `contents` read into the core's turns
 * (formats/gemini.ts), its `systemInstruction` and `tools` counted, and the compacted history given back
 * as the client's own contents. Everything else of the body passes untouched.
 */
import type { HistoryProblem } from '../compaction/index.js'
import { InvalidRequestError } from '../contract/errors.js'
import { GenerateContentBody } from '../contract/proxy-bodies.js'
import { bodyReader } from '../contract/validation.js'
import { withMessages } from '../contract/wire.js'
import { type Adapted, adaptHistory, givenBack, withCleared } from '../formats/index.js'
import type { ClearedHistory } from './openai.js'
import { geminiRules, systemInstructionText } from '../formats/gemini.js'
import type { ForwardedTail } from './anchors.js'
import type { ProxyParts } from './request.js'

/** A Gemini request whose history the proxy read, and the way back to the client's contents. */
export interface GeminiHistory extends ProxyParts {
  items: Record<string, unknown>[]
  adapted: Adapted
}

const checkGeminiBody = bodyReader<GenerateContentBody>(GenerateContentBody)

/**
 * Reads what compaction needs from a Gemini body, checked against its route's schema (GenerateContentBody),
 * refusing (400, naming the place) what cannot be read where it may be over the budget; under it the body
 * goes on for the upstream to judge.
 */
export function readGeminiRequest(
  body: unknown,
  budgetMayPass: () => boolean
): { kind: 'history'; history: GeminiHistory } | { kind: 'unread'; reason: string } {
  const checked = checkGeminiBody(body)
  if (!checked.ok) throw new InvalidRequestError(checked.message, checked.path ?? '/')
  const { contents, systemInstruction, tools } = checked.value
  if (!Array.isArray(contents)) {
    if (!budgetMayPass()) return { kind: 'unread', reason: 'history_not_read' }
    throw new InvalidRequestError('body.contents must be an array of contents', '/contents')
  }
  const adapted = adaptHistory(contents as Record<string, unknown>[], geminiRules)
  if ('kind' in adapted) {
    if (!budgetMayPass()) return { kind: 'unread', reason: 'history_not_read' }
    const problem = adapted as HistoryProblem
    throw new InvalidRequestError(problem.message.replace(/^messages\[/, 'contents['), problem.path.replace(/^\/messages/, '/contents'))
  }
  const system = systemInstructionText(systemInstruction)
  return {
    kind: 'history',
    history: {
      messages: adapted.messages,
      ...(system !== '' ? { system: [{ type: 'text' as const, text: system }] } : {}),
      ...(tools !== undefined ? { tools: tools as ProxyParts['tools'] } : {}),
      items: contents as Record<string, unknown>[],
      adapted
    }
  }
}

/** The body to forward with the compacted history as the client's own contents. */
export function geminiPayload(
  body: object,
  history: GeminiHistory,
  forwarded: ({ messages: ProxyParts['messages'] } & ForwardedTail) | undefined,
  cleared?: ClearedHistory
): Buffer {
  const items = cleared ? withCleared(history.items, history.adapted, cleared.messages, cleared.uses) : history.items
  if (!forwarded) return withMessages(body, items, 'contents')
  const given = givenBack(items, history.adapted, geminiRules, { messages: forwarded.messages, kept_from: forwarded.keptFrom, clips: forwarded.clips })
  return withMessages(body, given.items, 'contents')
}
