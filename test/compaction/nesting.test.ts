import { describe, expect, it } from 'vitest'
import { MAX_JSON_DEPTH, jsonProblem } from '../../src/compaction/index.js'

const nested = (depth: number): unknown => {
  let value: unknown = 'leaf'
  for (let i = 0; i < depth; i++) value = i % 2 ? { k: value } : [value]
  return value
}

describe('jsonProblem', () => {
  it('accepts a body up to the depth limit and refuses one level more, naming where', () => {
    expect(jsonProblem(nested(MAX_JSON_DEPTH - 1))).toBeUndefined()
    const deep = jsonProblem(nested(MAX_JSON_DEPTH + 1))
    expect(deep?.kind).toBe('depth')
    expect(deep?.path.split('/').length).toBeGreaterThan(MAX_JSON_DEPTH - 2)
  })

  it('refuses a million levels without a deep stack', () => {
    expect(jsonProblem(nested(1_000_000))?.kind).toBe('depth')
  })

  it('finds prototype keys wherever they are, however the JSON spelled them', () => {
    const escaped = JSON.parse('{"messages":[{"content":[{"\\u005f_proto__":{"polluted":true}}]}]}') as unknown
    expect(jsonProblem(escaped)).toMatchObject({ kind: 'prototype', path: '/messages/0/content/0/__proto__' })
    const ctor = JSON.parse('{"a":{"constructor":{"prototype":{"x":1}}}}') as unknown
    expect(jsonProblem(ctor)).toMatchObject({ kind: 'prototype', path: '/a/constructor' })
    // A field named constructor that is not an object with a prototype is a plain field.
    expect(jsonProblem({ a: { constructor: 'a string' }, 'x/y~z': 1 })).toBeUndefined()
  })

  it('passes scalars and flat bodies', () => {
    for (const value of [null, 1, 'text', true, [], {}, { messages: [{ role: 'user', content: 'hi' }] }]) expect(jsonProblem(value)).toBeUndefined()
  })
})
