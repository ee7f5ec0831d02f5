import { describe, expect, it } from 'vitest'
import { at } from '../../src/compaction/at.js'

describe('at', () => {
  it('returns the element at an index inside the array, falsy ones included', () => {
    expect(at(['a', 'b'], 1)).toBe('b')
    expect(at([0, ''], 0)).toBe(0)
    expect(at('xyz', 2)).toBe('z')
  })

  it('throws a RangeError naming the index and the bounds when the caller was wrong', () => {
    expect(() => at(['a'], 3)).toThrow(new RangeError('index 3 is outside 0..0'))
    expect(() => at([], 0)).toThrow(RangeError)
  })
})
