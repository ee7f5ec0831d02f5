import { describe, expect, it } from 'vitest'
import {
  type Message,
  NOTE_PREFIX,
  RECALL_TOOL_NAME,
  assembleHistory,
  clearedNote,
  at,
  headOf,
  isServiceText,
  isSummaryText,
  summaryBlocks,
  summaryNote,
  validateHistory
} from '../../src/compaction/index.js'
import { assistant, user } from '../helpers/history.js'

describe('the summary turn', () => {
  it("says the later turns are kept as they were; names the recall tool only with a cold layer, and quotes the client's hint", () => {
    const plain = summaryNote(undefined)
    expect(plain.startsWith(NOTE_PREFIX)).toBe(true)
    expect(plain).not.toContain(RECALL_TOOL_NAME)
    expect(summaryNote(undefined, { tool: RECALL_TOOL_NAME })).toContain(`\`${RECALL_TOOL_NAME}\` tool`)
    // the MCP server's tool, with the session it takes
    const mcp = summaryNote(undefined, { mcp: { session: 'sess-42' } })
    expect(mcp).toContain('`recall` tool of the `compaction-gateway` MCP server with session "sess-42"')
    expect(clearedNote(undefined, 'toolu_1')).not.toMatch(/recall|tool/)
    expect(clearedNote({ tool: 'gateway_recall' }, 'toolu_1')).toContain('call the `gateway_recall` tool with the query "toolu_1"')
    expect(summaryNote('  grep ~/.agent/log  ')).toContain('To search the raw older turns: grep ~/.agent/log')
    expect(summaryNote('   ')).toBe(plain)
  })

  it('is its own user message before an assistant message, and opens the first user message otherwise', () => {
    const blocks = summaryBlocks('<compaction-summary id="c">x</compaction-summary>', undefined)
    expect(blocks.map((b) => b.type)).toEqual(['text', 'text'])
    const head = { user: blocks, system: [] }
    expect(assembleHistory(head, [assistant('a'), user('b')])).toEqual([{ role: 'user', content: blocks }, assistant('a'), user('b')])
    expect(assembleHistory(head, [user('b'), assistant('a')])).toEqual([{ role: 'user', content: [...blocks, { type: 'text', text: 'b' }] }, assistant('a')])
    expect(assembleHistory(head, [])).toEqual([{ role: 'user', content: blocks }])
  })

  it('puts carried system blocks in a system message right after the summary turn, or before those of the kept one', () => {
    const blocks = summaryBlocks('<compaction-summary id="c">x</compaction-summary>', undefined)
    const rule = { type: 'text', text: 'Answer in French.' }
    const head = { user: blocks, system: [rule] }
    const own: Message = { role: 'system', content: 'Use tabs.' }
    const cases: Message[][] = [[assistant('a'), user('b')], [user('b'), assistant('a')], [user('b'), own, assistant('a')], [user('b')], []]
    expect(assembleHistory(head, at(cases, 0))).toEqual([{ role: 'user', content: blocks }, { role: 'system', content: [rule] }, assistant('a'), user('b')])
    expect(assembleHistory(head, at(cases, 1))).toEqual([
      { role: 'user', content: [...blocks, { type: 'text', text: 'b' }] },
      { role: 'system', content: [rule] },
      assistant('a')
    ])
    expect(assembleHistory(head, at(cases, 2))).toEqual([
      { role: 'user', content: [...blocks, { type: 'text', text: 'b' }] },
      { role: 'system', content: [rule, { type: 'text', text: 'Use tabs.' }] },
      assistant('a')
    ])
    for (const tail of cases) {
      const out = assembleHistory(head, tail)
      // every history assembled keeps the Messages API's placement of system messages
      expect(validateHistory(out)).toBeUndefined()
      // and the head is read back from it as it was put in
      expect(headOf(out, tail)).toEqual(head)
    }
  })

  it("knows the service's own texts when a compacted history comes back", () => {
    expect(isSummaryText('  <compaction-summary id="c">')).toBe(true)
    expect(isServiceText(summaryNote(undefined))).toBe(true)
    expect(isServiceText('a user wrote <compaction-summary')).toBe(false)
  })
})
