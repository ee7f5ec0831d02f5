/**
 * The Messages API's own refusals of a request body, written from its documentation, independent of the
 * gateway's code: the fake upstream answers 400 with these, as the API does, so a test through the proxy
 * fails where the real API would refuse what the gateway forwards.
 *
 * - roles: user and assistant alternate (consecutive turns of one role are merged by the API, but a
 *   system message may not stand between them), the first message is a user message;
 * - mid-conversation system messages: not first, right after a user message (or an assistant message that
 *   ends in a server tool use), followed by an assistant message or last, never two in a row, text only;
 * - tool pairing: every tool_use is answered by a tool_result in the very next message (the final assistant
 *   message may hold pending calls only where the request ends there), tool_results come first in their
 *   message, and each answers a call of the message before;
 * - text blocks are not empty; at most 4 cache_control breakpoints over tools, system and messages, and
 *   none on an empty text; no string holds an unpaired surrogate.
 */

type Json = null | boolean | number | string | Json[] | { [k: string]: Json }
interface Msg {
  role?: unknown
  content?: unknown
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

function blocks(m: Msg): Record<string, unknown>[] {
  if (typeof m.content === 'string') return [{ type: 'text', text: m.content }]
  return Array.isArray(m.content) ? (m.content.filter(isObject) as Record<string, unknown>[]) : []
}

/** The first lone surrogate in any string of the value, as a JSON path. */
function loneSurrogate(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') {
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i)
      if (c >= 0xd800 && c <= 0xdbff) {
        const d = value.charCodeAt(i + 1)
        if (d >= 0xdc00 && d <= 0xdfff) {
          i++
          continue
        }
        return path
      }
      if (c >= 0xdc00 && c <= 0xdfff) return path
    }
    return undefined
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = loneSurrogate(value[i], `${path}.${i}`)
      if (found) return found
    }
    return undefined
  }
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const found = loneSurrogate(v, path ? `${path}.${k}` : k)
      if (found) return found
    }
  }
  return undefined
}

function countBreakpoints(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + countBreakpoints(v), 0)
  if (!isObject(value)) return 0
  let n = isObject(value.cache_control) ? 1 : 0
  for (const [k, v] of Object.entries(value)) if (k !== 'cache_control') n += countBreakpoints(v)
  return n
}

/** The API's refusal of this body, or undefined where it would accept it. */
export function messagesApiRefusal(body: unknown): string | undefined {
  if (!isObject(body)) return 'body: a JSON object is required'
  const surrogate = loneSurrogate(body as Json, '')
  if (surrogate) return `${surrogate}: no low surrogate in string`
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) return 'messages: at least one message is required'
  const breakpoints = countBreakpoints(body.tools) + countBreakpoints(body.system) + countBreakpoints(messages)
  if (breakpoints > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`
  let lastTurn: Msg | undefined
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Msg
    if (!isObject(m)) return `messages.${i}: a message is an object`
    const role = m.role
    if (role !== 'user' && role !== 'assistant' && role !== 'system') return `messages.${i}.role: Input should be 'user', 'assistant' or 'system'`
    if (typeof m.content !== 'string' && !Array.isArray(m.content)) return `messages.${i}.content: Input should be a valid list`
    const own = blocks(m)
    for (let j = 0; j < own.length; j++) {
      const b = own[j] as Record<string, unknown>
      if (b.type === 'text' && (typeof b.text !== 'string' || b.text === '')) {
        return isObject(b.cache_control)
          ? `messages.${i}.content.${j}.text: cache_control cannot be set for empty text blocks`
          : `messages.${i}: text content blocks must be non-empty`
      }
    }
    if (role === 'system') {
      const before = messages[i - 1] as Msg | undefined
      const after = messages[i + 1] as Msg | undefined
      if (!before) return `messages.${i}: a system message cannot be the first message`
      if (before.role === 'system' || after?.role === 'system') return `messages.${i}: consecutive system messages are not allowed`
      const lastBefore = blocks(before).at(-1)
      if (before.role !== 'user' && lastBefore?.type !== 'server_tool_use')
        return `messages.${i}: a system message must immediately follow a user message or an assistant message that ends in a server tool use`
      if (after && after.role !== 'assistant') return `messages.${i}: a system message must be followed by an assistant message or be the last message`
      if (own.some((b) => b.type !== 'text')) return `messages.${i}: system messages support text blocks only`
      continue
    }
    if (i === 0 && role !== 'user') return 'messages.0.role: the first message must use the user role'
    // tool pairing against the previous turn
    const calls =
      lastTurn?.role === 'assistant'
        ? blocks(lastTurn)
            .filter((b) => b.type === 'tool_use')
            .map((b) => String(b.id))
        : []
    if (role === 'user') {
      const results = own.filter((b) => b.type === 'tool_result')
      const firstOther = own.findIndex((b) => b.type !== 'tool_result')
      const lastResult = own.map((b) => b.type).lastIndexOf('tool_result')
      if (firstOther >= 0 && lastResult > firstOther) return `messages.${i}: tool_result blocks must come first in the content, before any other block`
      for (const r of results)
        if (!calls.includes(String(r.tool_use_id)))
          return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(r.tool_use_id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`
      const answered = new Set(results.map((r) => String(r.tool_use_id)))
      const missing = calls.filter((id) => !answered.has(id))
      if (missing.length > 0)
        return `messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`
    } else if (calls.length > 0) {
      return `messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${calls.join(', ')}`
    } else if (own.some((b) => b.type === 'tool_result')) {
      return `messages.${i}: tool_result blocks belong in user messages`
    }
    lastTurn = m
  }
  return undefined
}
