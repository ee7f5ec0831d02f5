import { describe, expect, it } from 'vitest'
import { contractAjv } from '../helpers/contract.js'
import { compactRequestExample, compactResponseExample, errorExample } from '../../src/contract/examples.js'
import { CompactRequest, CompactResponse, ErrorResponse } from '../../src/contract/schemas.js'

describe('the contract’s examples', () => {
  it('are what the schemas accept, as the OpenAPI document shows them', () => {
    const a = contractAjv()
    expect(a.validate(CompactRequest as object, compactRequestExample), JSON.stringify(a.errors)).toBe(true)
    expect(a.validate(CompactResponse as object, compactResponseExample), JSON.stringify(a.errors)).toBe(true)
    expect(a.validate(ErrorResponse as object, errorExample), JSON.stringify(a.errors)).toBe(true)
  })

  it('show a compaction that did compact, its tail after its summary turn', () => {
    expect(compactResponseExample.compacted).toBe(true)
    expect(compactResponseExample.messages.length).toBeGreaterThan(1)
    expect(JSON.stringify(compactResponseExample.messages[0])).toContain('<compaction-summary')
  })
})
