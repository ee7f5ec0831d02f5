import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { clipHeadTail, clipMarker, sliceHead, sliceTail } from '../../src/compaction/clip.js'

describe('clipHeadTail', () => {
  it('returns a text that fits unchanged', () => {
    expect(clipHeadTail('short', 10)).toBe('short')
    expect(clipHeadTail('x'.repeat(10), 10)).toBe('x'.repeat(10))
  })

  it('keeps three fifths from the head and the rest from the tail, with a marker counting what went', () => {
    const text = 'H'.repeat(500) + 'M'.repeat(1_000) + 'T'.repeat(500)
    const clipped = clipHeadTail(text, 1_000)
    expect(clipped).toBe('H'.repeat(500) + 'M'.repeat(100) + clipMarker(1_000) + 'M'.repeat(0) + 'T'.repeat(400))
    expect(clipped).toContain('1000 characters clipped')
  })

  it('returns the text itself when the marker would make it no shorter', () => {
    const text = 'a'.repeat(60)
    expect(clipHeadTail(text, 50)).toBe(text)
  })

  it('treats a negative or fractional keep as its floor at zero', () => {
    const text = 'z'.repeat(1_000)
    expect(clipHeadTail(text, -5)).toBe(clipMarker(1_000))
    expect(clipHeadTail(text, 10.9)).toBe(clipHeadTail(text, 10))
  })

  it('never lengthens a text and always keeps its first and last characters', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 5_000 }), fc.integer({ min: 0, max: 6_000 }), (text, keep) => {
        const clipped = clipHeadTail(text, keep)
        expect(clipped.length).toBeLessThanOrEqual(text.length)
        if (clipped !== text) {
          const head = Math.ceil(keep * 0.6)
          expect(clipped.startsWith(text.slice(0, head))).toBe(true)
          expect(clipped.endsWith(text.slice(text.length - (keep - head)))).toBe(true)
        }
      })
    )
  })
})

describe('cuts that never split a character', () => {
  const lone = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
  it('keep every surrogate pair whole at every clip point, and a lone surrogate the client sent as it was', () => {
    const text = 'a😀b🎉𝔘c'.repeat(20)
    for (let n = 0; n <= text.length; n++) {
      expect(lone.test(sliceHead(text, n)), `head ${n}`).toBe(false)
      expect(lone.test(sliceTail(text, n)), `tail ${n}`).toBe(false)
      expect(lone.test(clipHeadTail(text, n)), `clip ${n}`).toBe(false)
      expect(sliceHead(text, n).length).toBeGreaterThanOrEqual(n - 1)
    }
    expect(sliceHead('x\ud83d', 2)).toBe('x\ud83d')
    const clipped = clipHeadTail('😀'.repeat(500), 101)
    const removed = Number(/\[… (\d+) characters clipped/.exec(clipped)?.[1])
    expect(clipped.replace(/\n\[… \d+ characters clipped by compaction-gateway …\]\n/, '').length + removed).toBe(1_000)
  })
})
