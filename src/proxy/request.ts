import { createHash } from 'node:crypto'
import { CHARS_PER_TOKEN, type Message, hasPrefixCheck, shapeProblem } from '../compaction/index.js'
import { InvalidRequestError } from '../contract/errors.js'
import { type CompactRequestBody, SESSION_ID_PATTERN } from '../contract/schemas.js'
import { MessagesBody } from '../contract/proxy-bodies.js'
import { bodyReader } from '../contract/validation.js'

/** The longest session id records keep; a longer metadata.user_id is named by its hash. */
export const MAX_SESSION_LENGTH = 200

/** The parts of a proxied request the compactor reads (a Messages API one as it is, another API's as the core reads it); everything else passes through untouched. */
export interface ProxyParts {
  messages: Message[]
  system?: CompactRequestBody['system']
  tools?: CompactRequestBody['tools']
  /** metadata.user_id, when the client sent one. */
  userId?: string
  /** The model checks each thinking block sent back against its prefix (the Messages API's preserved thinking). */
  unbindThinking?: boolean
}

function invalid(message: string, path: string): InvalidRequestError {
  return new InvalidRequestError(message, path)
}

const checkMessagesBody = bodyReader<MessagesBody>(MessagesBody)

/**
 * Reads what compaction needs from a Messages API body: checked against its route's schema (MessagesBody),
 * then each block as the estimate reads it (the fields its type needs, a tool result's parts one level
 * down); what could not be estimated is refused (400, naming the place). The Messages API's own rules are
 * the upstream's to enforce.
 */
export function readMessagesRequest(body: unknown): ProxyParts {
  const checked = checkMessagesBody(body)
  if (!checked.ok) throw invalid(checked.message, checked.path ?? '/')
  const { messages, system, tools, metadata } = checked.value
  const model = (body as { model?: unknown }).model
  for (const [i, { content }] of messages.entries()) {
    if (typeof content === 'string') continue
    for (let j = 0; j < content.length; j++) {
      const bad = shapeProblem(content[j], i, j)
      if (bad) throw invalid(bad.message, bad.path)
    }
  }
  const userId =
    typeof metadata === 'object' && metadata !== null && 'user_id' in metadata && typeof metadata.user_id === 'string' && metadata.user_id !== ''
      ? metadata.user_id
      : undefined
  return {
    messages,
    ...(system !== undefined ? { system: system as CompactRequestBody['system'] } : {}),
    ...(tools !== undefined ? { tools: tools as CompactRequestBody['tools'] } : {}),
    ...(userId !== undefined ? { userId } : {}),
    ...(hasPrefixCheck(model) ? { unbindThinking: true } : {})
  }
}

/** The headers by which agents name their session, most specific first (Claude Code's, opencode's and others', Codex's). */
export const SESSION_HEADERS = ['x-claude-code-session-id', 'x-session-id', 'x-session-affinity', 'session-id', 'session_id', 'thread-id'] as const

function headerValue(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header
}

/** Session ids records can keep and URLs give back (SESSION_ID_PATTERN): no control character, not `.` or `..`. */
const SESSION_ID = new RegExp(SESSION_ID_PATTERN, 'u')

/** A client's own session id as records keep it: as it came, or named by its hash when too long to keep or read back. */
function kept(id: string): string {
  return id.length <= MAX_SESSION_LENGTH && SESSION_ID.test(id) ? id : `user-${createHash('sha256').update(id).digest('hex')}`
}

/**
 * The gateway's own session header, checked: a value it cannot use is refused (400, naming the header),
 * whether or not the body is read.
 */
export function ownSession(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  const own = headers['x-compaction-session']
  if (own === undefined) return undefined
  const value = headerValue(own)
  if (value === undefined || value.trim() === '' || value.length > MAX_SESSION_LENGTH || !SESSION_ID.test(value.trim())) {
    throw invalid(
      `x-compaction-session: a session id of 1 to ${MAX_SESSION_LENGTH} characters, with no control character, and not "." or ".."`,
      '/headers/x-compaction-session'
    )
  }
  return value.trim()
}

/**
 * The session of a proxied request: x-compaction-session (the gateway's own, checked), else the session
 * id the agent sends (SESSION_HEADERS), else the body's own (metadata.user_id, prompt_cache_key).
 */
export function proxySession(headers: Readonly<Record<string, string | string[] | undefined>>, userId: string | undefined): string | undefined {
  const own = ownSession(headers)
  if (own !== undefined) return own
  for (const name of SESSION_HEADERS) {
    const value = headerValue(headers[name])?.trim()
    if (value) return kept(value)
  }
  return userId === undefined ? undefined : kept(userId)
}

/** The prefix of a session id the gateway made for a conversation whose client sent none. */
export const DERIVED_SESSION_PREFIX = 'conv-'

/**
 * A stable session id for a conversation whose client names none: from what tells the conversation apart
 * (its system prompt, its first message, and the model's first answer once there is one: two runs of the
 * same automated task under one key ask the same and are answered apart; records are per key already), so
 * that every request of it after its first finds the same id, and it is listed, recorded, recalled and
 * shown like any other. (A conversation's first request has no answer yet: it is under any budget.)
 */
export function derivedSession(parts: Pick<ProxyParts, 'system' | 'messages'>): string {
  const answer = parts.messages[1]
  const hash = createHash('sha256')
    .update(JSON.stringify(parts.system ?? null))
    .update('\n')
    .update(JSON.stringify(parts.messages[0] ?? null))
  if (answer?.role === 'assistant') hash.update('\n').update(JSON.stringify(answer.content))
  return `${DERIVED_SESSION_PREFIX}${hash.digest('hex').slice(0, 32)}`
}

/**
 * The blocks whose estimate is a flat cost, not their characters (images, documents), as their type's JSON
 * string: searched by its tail (whose first byte is rarer in JSON than a quote, so the runtime's search
 * skips most of the bytes; docs/performance.md), then the head before it checked.
 */
const FLAT_COST_TYPES = [
  { head: Buffer.from('"i'), tail: Buffer.from('mage"') },
  { head: Buffer.from('"doc'), tail: Buffer.from('ument"') }
]

/** Whether `bytes` hold the head and tail of a token, one right after the other. */
function holdsToken(bytes: Buffer, token: { head: Buffer; tail: Buffer }): boolean {
  const { head, tail } = token
  for (let at = bytes.indexOf(tail, head.length); at >= 0; at = bytes.indexOf(tail, at + 1)) {
    if (bytes.compare(head, 0, head.length, at - head.length, at) === 0) return true
  }
  return false
}

/** Whether a body's bytes may hold a block whose estimate is a flat cost (its type's name is there). */
export function mayHoldFlatCost(bytes: Buffer): boolean {
  return FLAT_COST_TYPES.some((t) => holdsToken(bytes, t))
}

/**
 * Whether a body's bytes alone show it far under the budget: UTF-8 bytes are at least as many as the
 * characters they encode, and the estimate counts characters (a message's overhead fewer than its JSON
 * takes), so bytes / CHARS_PER_TOKEN bounds it from above, unless a block of a flat cost may be there
 * (`flatCost`: that search, done once a body by ProxiedBody).
 */
export function farUnderBudget(bytes: Buffer, quietTokens: number, flatCost: (bytes: Buffer) => boolean = mayHoldFlatCost): boolean {
  if (bytes.length / CHARS_PER_TOKEN > quietTokens) return false
  return !flatCost(bytes)
}

/** The budget of a proxied request: x-compaction-budget (an integer of at least 1000, or "off"), else the server's. */
export function budgetTokensOf(header: string | string[] | undefined, fallback: number | 'off'): number | 'off' {
  if (header === undefined) return fallback
  const value = (Array.isArray(header) ? header[0] : header)?.trim()
  if (value === 'off') return 'off'
  if (value !== undefined && /^\d{4,9}$/.test(value) && Number(value) >= 1_000) return Number(value)
  throw invalid('x-compaction-budget: an integer of at least 1000, or "off"', '/headers/x-compaction-budget')
}
