import { NOTE_PREFIX } from './markers.js'
import { type Block, type Message, type TextBlock, blocksOf } from './types.js'

/** The name of the tool (GET /v1/tools/recall) that searches a session's compacted turns. */
export const RECALL_TOOL_NAME = 'recall'

/**
 * The server-owned note that follows the summary in the summary turn. With `recallTool`, the session
 * has a cold layer and the note says the compacted turns can be searched with the recall tool.
 */
export function summaryNote(recallHint: string | undefined, recallTool = false): string {
  const tool = recallTool
    ? ` The compacted turns are kept and searchable: call the \`${RECALL_TOOL_NAME}\` tool with a few words of what you need (an error, a file, a request) to get the exact text back.`
    : ''
  const recall = recallHint?.trim() ? ` To search the raw older turns: ${recallHint.trim()}` : ''
  return (
    `${NOTE_PREFIX} Earlier turns of this conversation were compacted: their facts are in the summary above, ` +
    `and the messages after it are the most recent turns, kept as they were.${tool}${recall}`
  )
}

export function summaryBlocks(summaryText: string, recallHint: string | undefined, recallTool = false): TextBlock[] {
  return [
    { type: 'text', text: summaryText },
    { type: 'text', text: summaryNote(recallHint, recallTool) }
  ]
}

/**
 * What a compaction puts in front of the kept tail: the summary turn's blocks (the summary, the server's
 * note, then the harness context carried over) and the system messages' blocks carried over.
 */
export interface SummaryHead {
  user: readonly Block[]
  system: readonly Block[]
}

/**
 * The head's messages and how many of the tail's first messages they stand for: where the tail opens with
 * a user message the summary turn's blocks go before that message's own content, so that roles still
 * alternate, and the carried system blocks go before those of the system message after it (or, without
 * one, in a system message of their own right after it: a system message follows a user message).
 */
export function assembledHead(head: SummaryHead, tail: readonly Message[]): { messages: Message[]; replaced: number } {
  const first = tail[0]
  const carried = head.system.length > 0
  if (first?.role !== 'user') {
    const messages: Message[] = [{ role: 'user', content: [...head.user] }]
    if (carried) messages.push({ role: 'system', content: [...head.system] })
    return { messages, replaced: 0 }
  }
  const merged: Message = { ...first, content: [...head.user, ...blocksOf(first)] }
  if (!carried) return { messages: [merged], replaced: 1 }
  const second = tail[1]
  if (second?.role === 'system') return { messages: [merged, { ...second, content: [...head.system, ...blocksOf(second)] }], replaced: 2 }
  return { messages: [merged, { role: 'system', content: [...head.system] }], replaced: 1 }
}

/** `[head, ...tail]`, the head merged into the tail's first messages where their roles call for it. */
export function assembleHistory(head: SummaryHead, tail: readonly Message[]): Message[] {
  const { messages, replaced } = assembledHead(head, tail)
  return messages.concat(tail.slice(replaced))
}

/**
 * The head a compaction put in front of `tail` (the inverse of assembleHistory): read back from the
 * compacted history, so that a proxy can put the same head in front of the same turns again.
 */
export function headOf(compacted: readonly Message[], tail: readonly Message[]): SummaryHead {
  const first = compacted[0]
  if (!first) return { user: [], system: [] }
  const opensWithUser = tail[0]?.role === 'user'
  const user = opensWithUser ? blocksOf(first).slice(0, blocksOf(first).length - blocksOf(tail[0] as Message).length) : blocksOf(first)
  const second = compacted[1]
  if (second?.role !== 'system') return { user, system: [] }
  const own = opensWithUser && tail[1]?.role === 'system' ? blocksOf(tail[1]).length : 0
  return { user, system: blocksOf(second).slice(0, blocksOf(second).length - own) }
}
