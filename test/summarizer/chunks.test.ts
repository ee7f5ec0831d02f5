import { describe, expect, it } from 'vitest'
import { textTokens } from '../../src/compaction/index.js'
import { chunkParts } from '../../src/summarizer/chunks.js'

describe('chunkParts', () => {
  it('clips a single message larger than the budget (head and tail) so that no chunk is over it', () => {
    const huge = { index: 3, text: `HEAD ${'x'.repeat(400_000)} TAIL` }
    const chunks = chunkParts([{ index: 1, text: 'small' }, huge, { index: 4, text: 'after' }], 10_000)
    for (const chunk of chunks) expect(chunk.reduce((n, p) => n + textTokens(p.text) + 2, 0)).toBeLessThanOrEqual(10_000)
    const clipped = chunks.flat().find((p) => p.index === 3)!
    expect(clipped.text.startsWith('HEAD')).toBe(true)
    expect(clipped.text.endsWith('TAIL')).toBe(true)
    expect(clipped.text).toContain('characters clipped by compaction-gateway')
    // every message is still there, in order
    expect(chunks.flat().map((p) => p.index)).toEqual([1, 3, 4])
  })
})
