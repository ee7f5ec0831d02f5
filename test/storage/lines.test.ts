import { describe, expect, it } from 'vitest'
import { byLines, lineCoverage } from '../../src/storage/lines.js'

describe("a recall's second look at lines", () => {
  it('raises a passage whose one line holds the words asked for above one that holds them scattered, the order kept among equals', () => {
    const scattered = { text: 'the rollout began\nworkers ready\ncodename pending', score: 1.6 }
    const together = { text: 'INFO worker 1 ready\nINFO the rollout codename is bluefin-7', score: 1.5 }
    const neither = { text: 'nothing here', score: 1.5 }
    expect(lineCoverage(together.text, new Set(['rollout', 'codenam']))).toBe(1)
    const ranked = byLines([scattered, neither, together], 'rollout codename', 3)
    expect(ranked.map((h) => h.text)).toEqual([together.text, scattered.text, neither.text])
    expect(ranked[0]!.score).toBeCloseTo(1.5 * 1.5)
  })

  it('leaves a one-word query to BM25 alone, and cuts to the limit', () => {
    const hits = [
      { text: 'a\nb', score: 3 },
      { text: 'codename', score: 2 },
      { text: 'x', score: 1 }
    ]
    expect(byLines(hits, 'codename', 2)).toEqual(hits.slice(0, 2))
  })
})
