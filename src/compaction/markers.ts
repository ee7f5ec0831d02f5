/** The tags by which the service knows its own blocks when a compacted history comes back to it. */
export const SUMMARY_OPEN = '<compaction-summary'
export const SUMMARY_CLOSE = '</compaction-summary>'
export const NOTE_PREFIX = '[compaction-gateway note]'

export function isSummaryText(text: string): boolean {
  return text.trimStart().startsWith(SUMMARY_OPEN)
}

export function isServiceText(text: string): boolean {
  return isSummaryText(text) || text.startsWith(NOTE_PREFIX)
}
