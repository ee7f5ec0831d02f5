/**
 * Thinking bound to its prefix (the Messages API's preserved thinking). On the newest Claude models a
 * `thinking` or `redacted_thinking` block sent back is checked against its prefix: the system prompt, the
 * tools loaded into the prompt and every message before it. Once anything before a block changed since it
 * was produced, that block and every later one are invalid (a 400, or dropped where the request asks).
 *
 * A rewrite of the history (a summary in place of the first turns, cleared tool results, cleared thinking)
 * changes the prefix of every block after its first change that was produced before it. Blocks produced
 * after it were produced on the rewritten prefix, which the gateway sends again byte for byte, so they stay
 * valid. What the API accepts then is the thinking of those stale turns taken out: a rewrite is described by
 * where its change begins and how many of the client's messages existed when it was made (`bound`).
 */
import { type Block, type Message, blocksOf } from './types.js'

/** A rewrite of the client's history: its first changed message, and the client's message count when it was made. */
export interface Rewrite {
  from: number
  bound: number
}

export const isThinkingBlock = (b: Block): boolean => b.type === 'thinking' || b.type === 'redacted_thinking'

/** Whether the model checks each thinking block sent back against its prefix (preserved thinking). */
export function hasPrefixCheck(model: unknown): boolean {
  if (typeof model !== 'string') return false
  const id = model.toLowerCase()
  if (!id.startsWith('claude-')) return false
  // The models before preserved thinking; every later one (and one not known here) has the check.
  return !/^claude-(?:instant|[0-3][-.]|(?:opus|sonnet|haiku)-[0-4](?:[-.@]|$)|(?:opus|sonnet|haiku|fable|mythos)-5(?:-\d{8})?(?:@.*)?$|mythos-preview)/.test(
    id
  )
}

/**
 * The client's history with the thinking of the turns each rewrite made stale taken out: an assistant
 * message at index i loses its thinking blocks where some rewrite has `from <= i < bound`. An assistant
 * message of thinking alone is left out (the API refuses an empty one). Messages untouched are the same
 * objects; `stripped` counts the blocks taken out.
 */
export function unbindThinking(messages: readonly Message[], rewrites: readonly Rewrite[]): { messages: Message[]; stripped: number; left: number[] } {
  const out: Message[] = []
  const left: number[] = []
  let stripped = 0
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Message
    const content = m.content
    const stale = m.role === 'assistant' && typeof content !== 'string' && rewrites.some((r) => r.from <= i && i < r.bound)
    if (!stale || typeof content === 'string' || !content.some(isThinkingBlock)) {
      out.push(m)
      continue
    }
    const kept = content.filter((b) => !isThinkingBlock(b))
    stripped += content.length - kept.length
    if (kept.length === 0) {
      left.push(i)
      continue
    }
    out.push({ ...m, content: kept })
  }
  return { messages: out, stripped, left }
}

/** Whether the history holds a thinking block at an assistant message in [from, to). */
export function holdsThinking(messages: readonly Message[], from = 0, to = messages.length): boolean {
  for (let i = Math.max(0, from); i < Math.min(to, messages.length); i++) {
    const m = messages[i] as Message
    if (m.role === 'assistant' && typeof m.content !== 'string' && m.content.some(isThinkingBlock)) return true
  }
  return false
}

/**
 * Whether the history ends inside a tool loop whose last assistant message does not begin with a thinking
 * block: with thinking `enabled`, the API requires that message to begin with one (the documented way out
 * is thinking off for the request).
 */
export function openLoopWithoutThinking(messages: readonly Message[]): boolean {
  let last = messages.length - 1
  while (last >= 0 && (messages[last] as Message).role === 'system') last--
  const final = messages[last]
  if (!final || final.role !== 'user' || !blocksOf(final).some((b) => b.type === 'tool_result')) return false
  for (let i = last - 1; i >= 0; i--) {
    const m = messages[i] as Message
    if (m.role === 'system') continue
    if (m.role !== 'assistant') return false
    const first = blocksOf(m)[0]
    return first === undefined || !isThinkingBlock(first)
  }
  return false
}
