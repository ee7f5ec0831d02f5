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
})
