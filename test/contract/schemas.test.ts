import { describe, expect, it } from 'vitest'
import { contractAjv } from '../helpers/contract.js'
import { LIST_SECTIONS } from '../../src/compaction/index.js'
import { compactRequestExample } from '../../src/contract/examples.js'
import { CompactRequest, SHARED_SCHEMAS, SummarySectionsSchema } from '../../src/contract/schemas.js'

describe('the contract’s schemas', () => {
  it('name each shared shape once, so that a $ref finds one schema', () => {
    const ids = SHARED_SCHEMAS.map((s) => (s as { $id?: string }).$id)
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it('hold every section of the summary, and nothing else', () => {
    expect(Object.keys(SummarySectionsSchema.properties).sort()).toEqual(['objective', ...LIST_SECTIONS].sort())
  })

  it('refuse a request field they do not know, where a message or block lets every field pass', () => {
    const a = contractAjv()
    expect(a.validate(CompactRequest as object, { ...compactRequestExample, budget: 1 })).toBe(false)
    expect(a.validate(CompactRequest as object, { messages: [{ role: 'user', content: [{ type: 'future_block', x: 1 }], id: 'm1' }] })).toBe(true)
  })
})
