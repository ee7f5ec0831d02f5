import { NOTE_PREFIX } from './markers.js'
import { type Message, type TextBlock, blocksOf } from './types.js'

/** The server-owned note that follows the summary in the summary turn. */
export function summaryNote(recallHint: string | undefined): string {
  const recall = recallHint?.trim() ? ` To search the raw older turns: ${recallHint.trim()}` : ''
  return (
    `${NOTE_PREFIX} Earlier turns of this conversation were compacted: their facts are in the summary above, ` +
    `and the messages after it are the most recent turns, kept as they were.${recall}`
  )
}

export function summaryBlocks(summaryText: string, recallHint: string | undefined): TextBlock[] {
  return [
    { type: 'text', text: summaryText },
    { type: 'text', text: summaryNote(recallHint) }
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
