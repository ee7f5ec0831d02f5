import { describe, expect, it } from 'vitest'
import { compactionRedactors, rulesetRanges, serviceRedact } from '../../src/secrets/index.js'
import { plantSecrets } from '../helpers/secrets.js'

const planted = new Map(plantSecrets().map((p) => [p.kind, p]))
const github = planted.get('github classic')?.secret ?? ''
const password = `Pw${Date.now()}xyzXYZ`

describe('the service redaction', () => {
  it('finds with both rulesets and replaces each secret by its kind', () => {
    const text = `token ${github} and DB_PASSWORD=${password}`
    expect(rulesetRanges(text).length).toBeGreaterThanOrEqual(2)
    const out = serviceRedact(text)
    expect(out).not.toContain(github)
    expect(out).not.toContain(password)
    expect(out).toMatch(/\[REDACTED:[\w-]+\]/)
    expect(serviceRedact('')).toBe('')
  })
})

describe('compactionRedactors', () => {
  it('remembers a secret found once and replaces it bare wherever it shows up again', () => {
    const r = compactionRedactors()
    expect(r.redact(`export API_TOKEN=${password}`)).toMatch(/^export API_TOKEN=\[REDACTED:[\w-]+\]$/)
    // bare, where no pattern would find it: replaced all the same, the rest of the text as it was
    expect(r.redact(`the model repeats ${password} bare`)).toMatch(/^the model repeats \[REDACTED:[\w-]+\] bare$/)
  })

  it('does not remember across compactions', () => {
    compactionRedactors().redact(`secret=${password}`)
    expect(compactionRedactors().redact(`bare ${password}`)).toBe(`bare ${password}`)
  })

  it('redacts many texts in one pass, each range back in the text it came from', () => {
    const r = compactionRedactors()
    const parts = ['nothing here', `gh ${github}`, 'between', `again ${github} end`]
    const out = r.redactParts(parts)
    expect(out[0]).toBe('nothing here')
    expect(out[2]).toBe('between')
    expect(out[1]).toMatch(/^gh \[REDACTED:[\w-]+\]$/)
    expect(out[3]).toMatch(/^again \[REDACTED:[\w-]+\] end$/)
  })
})
