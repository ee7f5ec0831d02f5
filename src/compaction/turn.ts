import { NOTE_PREFIX } from './markers.js'
import { type Block, type Message, type TextBlock, blocksOf } from './types.js'

/** The name of the tool (GET /v1/tools/recall) that searches a session's compacted turns. */
export const RECALL_TOOL_NAME = 'recall'
/** The recall tool the proxy offers the model and answers itself: a name a client's own tools are unlikely to have. */
export const PROXY_RECALL_TOOL = 'gateway_recall'
/** The MCP server's name, as the README has clients add it, and its tool's. */
export const MCP_SERVER_NAME = 'compaction-gateway'
export const MCP_RECALL_TOOL = 'recall'

/**
 * The tool a conversation's model searches its compacted turns with, as the texts it reads name it: a
 * tool of its own (`tool`), or the MCP server's (`mcp`: its tool takes the session, which the texts give).
 * Absent where the model has none: then no text names one.
 */
export type RecallNaming = { tool: string } | { mcp: { session: string } }

/** How a text tells the model to call its recall tool for `what` ("a few words of what you need"). */
function howToRecall(naming: RecallNaming, what: string): string {
  return 'tool' in naming
    ? `call the \`${naming.tool}\` tool with ${what}`
    : `call the \`${MCP_RECALL_TOOL}\` tool of the \`${MCP_SERVER_NAME}\` MCP server with session ${JSON.stringify(naming.mcp.session)} and ${what}`
}

/**
 * The server-owned note that follows the summary in the summary turn. With a recall tool (`recall`), the
 * note says the compacted turns are kept whole and how to search them; without one it names none.
 */
export function summaryNote(recallHint: string | undefined, recall?: RecallNaming): string {
  const tool = recall
    ? ` The compacted turns are kept whole and searchable: ${howToRecall(recall, 'a few words of what you need (an error, a file, a value a command printed)')} to get the exact text back.`
    : ''
  const hint = recallHint?.trim() ? ` To search the raw older turns: ${recallHint.trim()}` : ''
  return (
    `${NOTE_PREFIX} Earlier turns of this conversation were compacted: their facts are in the summary above, ` +
    `and the messages after it are the most recent turns, kept as they were.${tool}${hint}`
  )
}

/** What a cleared tool result's placeholder says of its output: where it is kept and how to get it back, only where the model has a tool for it. */
export function clearedNote(recall: RecallNaming | undefined, toolUseId: string): string {
  return recall
    ? `Its whole output is kept: ${howToRecall(recall, `the query ${JSON.stringify(toolUseId)}`)} to get it back.`
    : 'Its output is no longer in the conversation.'
}

export function summaryBlocks(summaryText: string, recallHint: string | undefined, recall?: RecallNaming): TextBlock[] {
  return [
    { type: 'text', text: summaryText },
    { type: 'text', text: summaryNote(recallHint, recall) }
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
