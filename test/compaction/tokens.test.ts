import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { DOCUMENT_TOKENS, IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, jsonChars, rawMessageTokens } from '../../src/compaction/index.js'

describe('token estimates', () => {
  it('cost images and documents flat, wherever they are, and text by its characters', () => {
    const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(100_000) } }
    const document = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'B'.repeat(50_000) }, title: 'spec' }
    expect(rawMessageTokens({ role: 'user', content: [image] })).toBe(IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS)
    expect(rawMessageTokens({ role: 'user', content: [document] })).toBe(DOCUMENT_TOKENS + MESSAGE_OVERHEAD_TOKENS)
    const inResult = { type: 'tool_result', tool_use_id: 'a', content: [{ type: 'text', text: 'x'.repeat(400) }, image] }
    expect(rawMessageTokens({ role: 'user', content: [inResult] })).toBe(100 + IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS)
  })

  it('measure a tool input about as JSON.stringify would, without building it, however deep', () => {
    const input = { command: 'ls -la', nested: [1, true, null, { a: 'b' }] }
    expect(Math.abs(jsonChars(input) - JSON.stringify(input).length)).toBeLessThanOrEqual(2)
    let deep: unknown = 'leaf'
    for (let i = 0; i < 100_000; i++) deep = [deep]
    expect(jsonChars(deep)).toBe(6 + 2 * 100_000)
  })

  it('count every value of any JSON as the plain rule says, scalars, arrays and objects alike', () => {
    // The rule stated directly: a string its length and quotes, null 4, an array its brackets and commas,
    // an object its braces and each key with its quotes, colon and comma.
    const rule = (v: unknown): number => {
      if (typeof v === 'string') return v.length + 2
      if (typeof v === 'number' || typeof v === 'boolean') return String(v).length
      if (v === null) return 4
      if (Array.isArray(v)) return 1 + v.length + v.reduce((n: number, e) => n + rule(e), 0)
      if (typeof v === 'object') return 1 + Object.entries(v).reduce((n, [k, e]) => n + k.length + 4 + rule(e), 0)
      return 0
    }
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(jsonChars(v)).toBe(rule(v))
      }),
      { numRuns: 500 }
    )
  })
})
