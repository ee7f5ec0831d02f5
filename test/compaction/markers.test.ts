import { describe, expect, it } from 'vitest'
import { NOTE_PREFIX, SUMMARY_CLOSE, SUMMARY_OPEN, isServiceText, isSummaryText } from '../../src/compaction/markers.js'

describe('markers', () => {
  it('knows a summary by its opening tag, after leading blanks', () => {
    expect(isSummaryText(`${SUMMARY_OPEN} id="cmp_1">\n## Objective\n${SUMMARY_CLOSE}`)).toBe(true)
    expect(isSummaryText(`\n  ${SUMMARY_OPEN} id="cmp_1">`)).toBe(true)
  })

  it('does not take a text that merely mentions the tag for a summary', () => {
    expect(isSummaryText(`see ${SUMMARY_OPEN}> in the docs`)).toBe(false)
    expect(isSummaryText('')).toBe(false)
  })

  it('knows the service’s notes by their prefix at the very start, and its summaries', () => {
    expect(isServiceText(`${NOTE_PREFIX} 3 turns compacted`)).toBe(true)
    expect(isServiceText(`${SUMMARY_OPEN}>`)).toBe(true)
    expect(isServiceText(` ${NOTE_PREFIX} indented`)).toBe(false)
    expect(isServiceText('a user message')).toBe(false)
  })
})
