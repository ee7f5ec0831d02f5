import { type Message, isPromptMessage } from './types.js'
import { at } from './at.js'

/**
 * Indices where a cut may fall: an assistant message or a prompt message. A cut there never separates
 * a tool_use from its tool_result, because a tool_result always sits in the message right after its call.
 */
export function safeBoundaries(messages: readonly Message[]): number[] {
  const out: number[] = []
  for (let i = 0; i < messages.length; i++) {
    const m = at(messages, i)
    if (m.role === 'assistant' || isPromptMessage(m)) out.push(i)
  }
  return out
}

/** Number of prompt messages (turns begun) in messages[from..to). */
export function countPrompts(messages: readonly Message[], from = 0, to = messages.length): number {
  let n = 0
  for (let i = from; i < to; i++) if (isPromptMessage(at(messages, i))) n++
  return n
}
