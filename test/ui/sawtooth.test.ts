import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { DROP, describeTimeline, sawtooth } from '../../src/ui/sawtooth.js'

const point = (id: string, before: number, after: number, budget: number | null = 45_000) => ({
  compaction_id: id,
  created_at: '2026-12-01T00:00:00.000Z',
  raw_history_tokens: before,
  context_after_compaction: after,
  budget_tokens: budget
})

describe('the sawtooth', () => {
  it("numbers the points from the session's compaction the first of them is", () => {
    expect(sawtooth([point('a', 50_000, 9_000), point('b', 47_000, 8_000)], 5).x).toEqual([5, 5 + DROP, 6, 6 + DROP])
  })

  it('climbs to each compaction and drops after it, the budget beside it', () => {
    expect(sawtooth([point('a', 50_000, 9_000), point('b', 47_000, 8_000, null)])).toEqual({
      x: [1, 1 + DROP, 2, 2 + DROP],
      prompt: [50_000, 9_000, 47_000, 8_000],
      budget: [45_000, 45_000, null, null],
      ids: ['a', 'a', 'b', 'b']
    })
  })

  it('keeps x strictly increasing (uPlot needs it) for any number of compactions', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 2_000 }), (pairs) => {
        const s = sawtooth(pairs.map(([b, a], i) => point(`c${i}`, b, a)))
        expect(s.x).toHaveLength(pairs.length * 2)
        for (let i = 1; i < s.x.length; i++) expect(s.x[i]!).toBeGreaterThan(s.x[i - 1]!)
      })
    )
  })

  it('is described in one sentence for a screen reader', () => {
    expect(describeTimeline([point('a', 50_000, 9_000), point('b', 47_000, 8_000)], true)).toBe(
      '2 compactions: the prompt reached 47,000–50,000 tokens before each and 8,000–9,000 after. Budget 45,000 tokens.'
    )
    expect(describeTimeline([point('a', 1_000, 900, null)], false)).toBe('The newest 1 compaction: the prompt reached 1,000 tokens before it and 900 after.')
    expect(describeTimeline([point('a', 50_000, 9_000), point('b', 41_000, 8_000, 40_000), point('c', 46_000, 8_500)], true)).toBe(
      '3 compactions: the prompt reached 41,000–50,000 tokens before each and 8,000–9,000 after. Budget 40,000–45,000 tokens (2 budgets).'
    )
    expect(describeTimeline([], true)).toBe('No compactions.')
  })
})
