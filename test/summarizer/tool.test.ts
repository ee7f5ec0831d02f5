import { describe, expect, it } from 'vitest'
import { LIST_SECTIONS, emptySections } from '../../src/compaction/index.js'
import { SUMMARY_TOOL_NAME, readToolInput, summaryTool } from '../../src/summarizer/tool.js'

describe('the summary tool', () => {
  it('offers every section, each optional, under its fixed name', () => {
    expect(summaryTool.name).toBe(SUMMARY_TOOL_NAME)
    expect(Object.keys(summaryTool.input_schema.properties as object).sort()).toEqual(['objective', ...LIST_SECTIONS].sort())
    expect(summaryTool.input_schema.required ?? []).toEqual([])
  })

  it('reads an input as sections, a missing section as empty, blank items left out', () => {
    const read = readToolInput({ objective: 'ship it', files_modified: ['a.py — x', '  '], next_steps: [] })
    expect(read).toEqual({ sections: { ...emptySections(), objective: 'ship it', files_modified: ['a.py — x'] } })
  })

  it('names the first place where an input has the wrong shape', () => {
    expect(readToolInput({ objective: 'x', key_decisions: ['ok', 3] })).toEqual({
      error: expect.stringMatching(/^the record_summary input at \/key_decisions\/1 /)
    })
    expect(readToolInput('not an object')).toEqual({ error: expect.stringMatching(/^the record_summary input at \/ /) })
  })
})
