import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MAX_QUERY_TERMS, MAX_TERMS, Terms, newKey, ownerOf, seal, unseal, wordsOf } from '../../src/storage/sealing.js'

describe('seal', () => {
  it('gives back any text it sealed, astral characters and NULs included, with its key only', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (text) => {
        const key = newKey()
        const sealed = seal(key, text)
        // (a lone surrogate has no UTF-8: it is kept as U+FFFD, as any UTF-8 store keeps it)
        expect(unseal(key, sealed)).toBe(Buffer.from(text, 'utf8').toString('utf8'))
        expect(() => unseal(newKey(), sealed)).toThrow()
      })
    )
  })

  it('writes no byte of the text in clear, and seals the same text twice differently', () => {
    const key = newKey()
    const a = seal(key, 'zqxsecret ran pytest')
    expect(a.toString('latin1')).not.toContain('zqxsecret')
    expect(seal(key, 'zqxsecret ran pytest').equals(a)).toBe(false)
  })

  it('refuses bytes changed after sealing', () => {
    const key = newKey()
    const sealed = seal(key, 'a record')
    sealed[sealed.length - 1]! ^= 1
    expect(() => unseal(key, sealed)).toThrow()
  })
})

describe('ownerOf', () => {
  it("names a tenant's session by a hash that holds neither, and tells tenants and sessions apart", () => {
    const owner = ownerOf('alice', 'sess-1')
    expect(owner).toMatch(/^[0-9a-f]{32}$/)
    expect(new Set([owner, ownerOf('bob', 'sess-1'), ownerOf('alice', 'sess-2'), ownerOf('alices', 'ess-1'), ownerOf('alice\u0000sess', '1')]).size).toBe(5)
  })
})

describe('wordsOf', () => {
  it('reads words of letters and digits, lower case, without diacritics, stemmed, at least two characters', () => {
    expect(wordsOf('Failing tests: parse_config() raised TypeError in café.py, x = 42')).toEqual([
      'fail',
      'test',
      'pars',
      'config',
      'rais',
      'typeerror',
      'in',
      'cafe',
      'py',
      '42'
    ])
    expect(wordsOf('failed FAILS fail')).toEqual(['fail', 'fail', 'fail'])
    expect(wordsOf('OR "quoted" -not NEAR(a,b) 日本語 😀')).toEqual(['or', 'quot', 'not', 'near', '日本語'])
  })
})

describe('Terms', () => {
  it("gives each word a term of the session's own, letters a to p only, the same each time", () => {
    const key = newKey()
    const terms = new Terms(key)
    const of = terms.of('parser failed in parser')
    expect(of).toMatch(/^(t[a-p]{16} ){3}t[a-p]{16}$/)
    const [parser, failed, , again] = of.split(' ')
    expect(again).toBe(parser)
    expect(new Terms(key).query('failing parsers')).toEqual([failed, parser])
    expect(new Terms(newKey()).query('parser')).not.toEqual([parser])
  })

  it('indexes at most MAX_TERMS words of an entry and searches at most MAX_QUERY_TERMS', () => {
    const terms = new Terms(newKey())
    expect(terms.of('word '.repeat(MAX_TERMS + 10)).split(' ')).toHaveLength(MAX_TERMS)
    expect(terms.query(Array.from({ length: 50 }, (_, i) => `w${i}`).join(' '))).toHaveLength(MAX_QUERY_TERMS)
  })
})
