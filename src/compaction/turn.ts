import { NOTE_PREFIX } from './markers.js'
import { type Message, type TextBlock, blocksOf } from './types.js'

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
 * `[summary turn, ...tail]`. Where the tail opens with a user message the summary blocks are put before
 * that message's own content instead, so that roles still alternate.
 */
export function assembleHistory(blocks: readonly TextBlock[], tail: readonly Message[]): Message[] {
  const first = tail[0]
  if (first?.role === 'user') return [{ ...first, content: [...blocks, ...blocksOf(first)] }, ...tail.slice(1)]
  return [{ role: 'user', content: [...blocks] }, ...tail]
}
