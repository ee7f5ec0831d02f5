import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { boundFiles, fitSections } from '../../src/compaction/fit.js'
import { type SummarySections, emptySections, itemPath } from '../../src/compaction/sections.js'
import { formattedLength } from '../../src/compaction/summary-text.js'
import { CHARS_PER_TOKEN } from '../../src/compaction/tokens.js'

const header = { id: 'cmp_test', compactedTurns: 10 }
const tokens = (s: SummarySections): number => Math.ceil(formattedLength(s, header) / CHARS_PER_TOKEN)

function big(files: number, items: number, itemChars: number): SummarySections {
  const s = emptySections()
  s.objective = 'Make the importer stream large files'
  s.user_requests = [
    'ISSUE:\nImporter runs out of memory on large CSV files\n' + 'details '.repeat(200),
    ...Array.from({ length: items }, (_, i) => `request ${i} ${'w'.repeat(itemChars)}`)
  ]
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
      fc.property(
        fc.integer({ min: 0, max: 400 }),
        fc.integer({ min: 0, max: 80 }),
        fc.integer({ min: 8, max: 3_000 }),
        fc.integer({ min: 300, max: 20_000 }),
        (files, items, chars, budget) => {
          expect(tokens(fitSections(big(files, items, chars), budget, header))).toBeLessThanOrEqual(budget)
        }
      ),
      { numRuns: 60 }
    )
  })

  it('fits a summary whose files were cut to the budget (boundFiles) as it fits the whole one, counting every file left out', () => {
    // Items of every shape the files lists hold: bare paths, "path — what", several lines, empty.
    const item = fc.oneof(
      fc.integer({ min: 0, max: 1e6 }).map((i) => `src/m${i}.py`),
      fc.tuple(fc.integer({ min: 0, max: 1e6 }), fc.string({ maxLength: 200 })).map(([i, how]) => `lib/f${i}.ts — ${how}`),
      fc.string({ maxLength: 60 })
    )
    // Lists of up to 3,000 items (fast-check's own arrays stay short), cycling through drawn items.
    const list = fc
      .tuple(fc.integer({ min: 0, max: 3_000 }), fc.array(item, { minLength: 1, maxLength: 12 }))
      .map(([n, drawn]) => Array.from({ length: n }, (_, i) => drawn[i % drawn.length]!))
    fc.assert(
      fc.property(list, list, fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 2_500 }), (modified, inspected, items, budget) => {
        const s = big(0, items, 50)
        s.files_modified = modified
        s.files_inspected = inspected
        const { sections, omitted } = boundFiles(s, budget)
        const fitted = fitSections(sections, budget, header, omitted)
        expect(fitted).toEqual(fitSections(s, budget, header))
        for (const key of ['files_modified', 'files_inspected'] as const) {
          const line = /^\((\d+) more files, older, left out to fit the summary budget\)$/.exec(fitted[key][0] ?? '')
          const listed = fitted[key].length - (line ? 1 : 0)
          expect(listed + Number(line?.[1] ?? 0)).toBe(s[key].length)
        }
      }),
      { numRuns: 150 }
    )
  })

  it('cuts only lists too long to fit whole, keeping their newest, and copies nothing otherwise', () => {
    const s = big(100, 3, 10)
    expect(boundFiles(s, 4_500)).toEqual({ sections: s, omitted: {} })
    expect(boundFiles(s, 4_500).sections).toBe(s)
    s.files_inspected = Array.from({ length: 10_000 }, (_, i) => `docs/p${i}.md`)
    const { sections, omitted } = boundFiles(s, 4_500)
    expect(omitted).toEqual({ files_inspected: 4_000 })
    expect(sections.files_inspected).toEqual(s.files_inspected.slice(4_000))
    expect(sections.files_modified).toBe(s.files_modified)
  })
})
