import { describe, expect, it } from 'vitest'
import { NOTE_PREFIX, RECALL_TOOL_NAME, assembleHistory, isServiceText, isSummaryText, summaryBlocks, summaryNote } from '../../src/compaction/index.js'
import { assistant, user } from '../helpers/history.js'

describe('the summary turn', () => {
  it("says the later turns are kept as they were; names the recall tool only with a cold layer, and quotes the client's hint", () => {
    const plain = summaryNote(undefined)
    expect(plain.startsWith(NOTE_PREFIX)).toBe(true)
    expect(plain).not.toContain(RECALL_TOOL_NAME)
    expect(summaryNote(undefined, true)).toContain(`\`${RECALL_TOOL_NAME}\` tool`)
    expect(summaryNote('  grep ~/.agent/log  ')).toContain('To search the raw older turns: grep ~/.agent/log')
    expect(summaryNote('   ')).toBe(plain)
  })

  it('is its own user message before an assistant message, and opens the first user message otherwise', () => {
    const blocks = summaryBlocks('<compaction-summary id="c">x</compaction-summary>', undefined)
    expect(blocks.map((b) => b.type)).toEqual(['text', 'text'])
    expect(assembleHistory(blocks, [assistant('a'), user('b')])).toEqual([{ role: 'user', content: blocks }, assistant('a'), user('b')])
    expect(assembleHistory(blocks, [user('b'), assistant('a')])).toEqual([{ role: 'user', content: [...blocks, { type: 'text', text: 'b' }] }, assistant('a')])
    expect(assembleHistory(blocks, [])).toEqual([{ role: 'user', content: blocks }])
  })

  it("knows the service's own texts when a compacted history comes back", () => {
    expect(isSummaryText('  <compaction-summary id="c">')).toBe(true)
    expect(isServiceText(summaryNote(undefined))).toBe(true)
    expect(isServiceText('a user wrote <compaction-summary')).toBe(false)
  })
})
