import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { SEALED_ITEM, itemKey, tenantSeal } from '../../src/proxy/item-seal.js'

const KEY = itemKey(Buffer.alloc(32, 1))
const OLD_KEY = itemKey(Buffer.alloc(32, 2))

describe('tenantSeal', () => {
  it('opens what it sealed, any text (astral characters, NULs, megabytes), and shows none of it', () => {
    const seal = tenantSeal([KEY], 'alpha')
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        const sealed = seal.seal(text)
        expect(sealed.startsWith(SEALED_ITEM)).toBe(true)
        expect(seal.open(sealed)).toBe(text)
      })
    )
    const big = `${'😀\u0000'.repeat(300_000)}the end`
    const sealed = seal.seal(big)
    expect(seal.open(sealed)).toBe(big)
    expect(Buffer.from(sealed.slice(SEALED_ITEM.length), 'base64url').toString('latin1')).not.toContain('the end')
  })

  it('opens nothing changed at any place, nor sealed for another tenant or under a key it does not hold', () => {
    const seal = tenantSeal([KEY], 'alpha')
    const sealed = seal.seal('the compacted history')
    // every place, each character changed to its neighbour (the last one's spare bits included)
    for (let at = SEALED_ITEM.length; at < sealed.length; at++) {
      const c = sealed[at] === 'A' ? 'B' : 'A'
      expect(seal.open(`${sealed.slice(0, at)}${c}${sealed.slice(at + 1)}`)).toBeUndefined()
    }
    expect(seal.open(`${sealed}=`)).toBeUndefined()
    expect(seal.open(sealed.slice(0, -4))).toBeUndefined()
    expect(seal.open(SEALED_ITEM)).toBeUndefined()
    expect(seal.open(`cgw1.${Buffer.from('["x"]').toString('base64url')}`)).toBeUndefined()
    expect(tenantSeal([KEY], 'beta').open(sealed)).toBeUndefined()
    expect(tenantSeal([OLD_KEY], 'alpha').open(sealed)).toBeUndefined()
  })

  it('seals under its first key and opens under any: a rotation reads what the previous key sealed', () => {
    const before = tenantSeal([OLD_KEY], 'alpha').seal('sealed before the rotation')
    const rotated = tenantSeal([KEY, OLD_KEY], 'alpha')
    expect(rotated.open(before)).toBe('sealed before the rotation')
    expect(tenantSeal([KEY], 'alpha').open(rotated.seal('after'))).toBe('after')
    expect(() => tenantSeal([], 'alpha')).toThrow(/needs a key/)
  })
})
