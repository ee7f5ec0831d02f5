import { describe, expect, it } from 'vitest'
import { secretlintRanges } from '../../src/secrets/secretlint.js'
import { plantSecrets } from '../helpers/secrets.js'

describe('secretlintRanges', () => {
  const planted = new Map(plantSecrets().map((p) => [p.kind, p]))

  it('finds what the recommended preset covers, at its place, under the rule’s name', () => {
    const key = planted.get('github classic')?.secret ?? ''
    const text = `line one\nexport GH=${key}\n`
    const ranges = secretlintRanges(text)
    expect(ranges).toHaveLength(1)
    expect(text.slice(ranges[0]!.start, ranges[0]!.end)).toContain(key)
    expect(ranges[0]!.kind).toBe('github')
  })

  it('finds nothing in ordinary text, and does not carry findings from one call to the next', () => {
    secretlintRanges(`k=${planted.get('github classic')?.secret}`)
    expect(secretlintRanges('const x = compute(42) // no secret here')).toEqual([])
  })
})
