import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { fitSections } from '../../src/compaction/fit.js'
import { type SummarySections, emptySections, itemPath } from '../../src/compaction/sections.js'
import { formattedLength } from '../../src/compaction/summary-text.js'
import { CHARS_PER_TOKEN } from '../../src/compaction/tokens.js'

const header = { id: 'cmp_test', compactedTurns: 10 }
const tokens = (s: SummarySections): number => Math.ceil(formattedLength(s, header) / CHARS_PER_TOKEN)

function big(files: number, items: number, itemChars: number): SummarySections {
  const s = emptySections()
  s.objective = 'Make the importer stream large files'
  s.user_requests = ['ISSUE:\nImporter runs out of memory on large CSV files\n' + 'details '.repeat(200), ...Array.from({ length: items }, (_, i) => `request ${i} ${'w'.repeat(itemChars)}`)]
  s.files_modified = Array.from({ length: files }, (_, i) => `src/mod${i}.py — ${'changed '.repeat(itemChars / 8)}`)
  s.key_decisions = Array.from({ length: items }, (_, i) => `decision ${i} ${'d'.repeat(itemChars)}`)
  return s
}

describe('fitSections', () => {
  it('returns a summary that fits as it is', () => {
    const s = big(3, 3, 20)
    expect(fitSections(s, 10_000, header)).toEqual(s)
  })

  it('shortens long items and old entries before it touches files, and keeps the task statement first', () => {
    const s = big(20, 60, 800)
    const out = fitSections(s, 3_000, header)
    expect(tokens(out)).toBeLessThanOrEqual(3_000)
    expect(out.files_modified.map(itemPath)).toEqual(s.files_modified.map(itemPath))
    expect(out.key_decisions.length).toBeLessThan(s.key_decisions.length)
    expect(out.key_decisions.at(-1)).toMatch(/^decision 59 /)
    expect(out.user_requests.some((r) => r.startsWith('ISSUE:\nImporter runs out of memory'))).toBe(true)
  })

  it('drops the oldest files last, counting them, when bare paths alone are over the budget', () => {
    const s = big(2_000, 5, 40)
    const out = fitSections(s, 1_000, header)
    expect(tokens(out)).toBeLessThanOrEqual(1_000)
    expect(out.files_modified[0]).toMatch(/^\(\d+ more files, older, left out to fit the summary budget\)$/)
    expect(out.files_modified.at(-1)).toBe('src/mod1999.py')
  })

  it('holds its bound whatever the sizes, down to a small floor', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 80 }), fc.integer({ min: 8, max: 3_000 }), fc.integer({ min: 300, max: 20_000 }), (files, items, chars, budget) => {
        expect(tokens(fitSections(big(files, items, chars), budget, header))).toBeLessThanOrEqual(budget)
      }),
      { numRuns: 60 }
    )
  })
})
