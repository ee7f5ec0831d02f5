import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { jsonBytes, messageCuts, parseJsonBytes } from '../../src/contract/wire.js'

const bytes = (text: string): Buffer => Buffer.from(text)

/** What JSON.parse does with the same bytes: its value, or its error's words. */
function wholeParse(body: Buffer): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(body.toString('utf8')) as unknown }
  } catch (err) {
    return { error: (err as Error).message }
  }
}

function piecewiseParse(body: Buffer): { value: unknown } | { error: string } {
  try {
    return { value: parseJsonBytes(body) }
  } catch (err) {
    return { error: (err as Error).message }
  }
}

/** Bodies as clients send them: other keys around a `messages` array, strings with quotes, escapes and characters of every width. */
const text = fc.string({
  unit: fc.oneof(
    fc.constantFrom('"', '\\', ',', '[', ']', '{', '}', ':', '\n', 'é', '✓', '🙂'),
    fc.integer({ min: 0, max: 0x10ffff }).map((c) => String.fromCodePoint(c))
  ),
  maxLength: 40
})
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('user', 'assistant'), content: text }),
  fc.record({
    role: fc.constant('user'),
    content: fc.array(fc.record({ type: fc.constant('tool_result'), tool_use_id: text, content: text }), { maxLength: 3 })
  }),
  fc.jsonValue({ maxDepth: 3 })
)
const body = fc.record(
  { mode: fc.constantFrom('manual', 'auto'), system: text, messages: fc.array(message, { maxLength: 12 }), extra: fc.jsonValue({ maxDepth: 2 }) },
  { requiredKeys: ['messages'] }
)

describe('parseJsonBytes', () => {
  it('gives JSON.parse’s value for any body, however it is spaced', () => {
    fc.assert(
      fc.property(body, fc.constantFrom(undefined, 0, 1, 2, '\t'), (value, indent) => {
        const encoded = bytes(JSON.stringify(value, null, indent))
        expect(messageCuts(encoded)).toBeDefined() // the piecewise path is the one taken
        expect(parseJsonBytes(encoded)).toEqual(JSON.parse(encoded.toString()))
      }),
      { numRuns: 2_000 }
    )
  })

  it('fails exactly when JSON.parse fails, with its words, on bodies with one byte changed', () => {
    fc.assert(
      fc.property(body, fc.nat(), fc.constantFrom('', ',', ']', '}', '"', '\\', '[', '{', ' ', 'x'), (value, at, insert) => {
        const text = JSON.stringify(value)
        const i = at % (text.length + 1)
        for (const mutated of [text.slice(0, i) + insert + text.slice(i), text.slice(0, i) + insert + text.slice(i + 1)]) {
          const body = bytes(mutated)
          expect(piecewiseParse(body)).toEqual(wholeParse(body))
        }
      }),
      { numRuns: 3_000 }
    )
  })

  it.each([
    ['an empty array', '{"messages":[]}'],
    ['a blank array', '{"messages": [ \n ] }'],
    ['a trailing comma', '{"messages":[1,]}'],
    ['a leading comma', '{"messages":[,1]}'],
    ['two messages keys (the last wins)', '{"messages":[1],"messages":[2,3]}'],
    ['an escaped key that spells messages', '{"messages":[1],"mess\\u0061ges":[2]}'],
    ['a key holding a quote', '{"a\\"b":1,"messages":[{"x":"\\\\"},"]"]}'],
    ['messages that is not an array', '{"messages":{"a":[1,2]}}'],
    ['messages inside another object only', '{"m":{"messages":[1,2]}}'],
    ['a top-level array', '[{"messages":[1,2]}]'],
    ['a value that spells "messages"', '{"mode":"messages","messages":["messages",{"messages":[1]}]}'],
    ['a prototype key', '{"__proto__":{"x":1},"messages":[{"__proto__":[]}]}'],
    ['text after the body', '{"messages":[1]} x'],
    ['an unclosed array', '{"messages":[1,2'],
    ['brackets crossed', '{"messages":[1}]'],
    ['a byte-order mark', '\ufeff{"messages":[1]}']
  ])('agrees with JSON.parse on %s', (_name, text) => {
    expect(piecewiseParse(bytes(text))).toEqual(wholeParse(bytes(text)))
  })

  it('keeps a prototype key an own property, as JSON.parse does', () => {
    const value = parseJsonBytes(bytes('{"messages":[{"__proto__":{"polluted":true}}]}')) as { messages: object[] }
    expect(Object.keys(value.messages[0]!)).toEqual(['__proto__'])
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined()
  })

  it('decodes broken UTF-8 as the whole body’s decoding does, a replacement character for each bad sequence', () => {
    const body = Buffer.concat([bytes('{"messages":["a'), Buffer.from([0xe2, 0x9c]), bytes('",'), bytes('"'), Buffer.from([0xff]), bytes('b"]}')])
    expect(parseJsonBytes(body)).toEqual(JSON.parse(body.toString('utf8')))
    expect((parseJsonBytes(body) as { messages: string[] }).messages).toEqual(['a\ufffd', '\ufffdb'])
  })

  it('parses a body of megabytes and 50,000 blocks as JSON.parse does', () => {
    const blocks = Array.from({ length: 25_000 }, (_, i) => [
      { role: 'assistant', content: [{ type: 'tool_use', id: `t${i}`, name: 'bash', input: { command: `grep -n "x\\"${i}" é✓` } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: `t${i}`, content: `line, ] } ${'é'.repeat(i % 50)}\n`.repeat(4) }] }
    ]).flat()
    const body = bytes(JSON.stringify({ mode: 'manual', messages: [{ role: 'user', content: 'go' }, ...blocks], system: 'be brief' }))
    expect(body.length).toBeGreaterThan(5_000_000)
    expect(messageCuts(body)?.commas).toHaveLength(blocks.length)
    expect(parseJsonBytes(body)).toEqual(JSON.parse(body.toString()))
  })
})

describe('messageCuts', () => {
  it('finds the array and each comma between its elements, none inside them', () => {
    const body = bytes('{"system":"a,b","messages":[{"c":[1,2]}, "x,y" ,3],"z":[4,5]}')
    const cuts = messageCuts(body)!
    expect(body.toString('utf8', cuts.open, cuts.close + 1)).toBe('[{"c":[1,2]}, "x,y" ,3]')
    expect(cuts.commas.map((c) => body.toString('utf8', cuts.open + 1, c))).toEqual(['{"c":[1,2]}', '{"c":[1,2]}, "x,y" '])
  })

  it('leaves a body it does not recognize to JSON.parse', () => {
    expect(messageCuts(bytes('{"messages":[1],"messages":[2]}'))).toBeUndefined()
    expect(messageCuts(bytes('{"mess\\u0061ges":[1]}'))).toBeUndefined()
    expect(messageCuts(bytes('{"messages":null}'))).toBeUndefined()
    expect(messageCuts(bytes('{"other":[1,2]}'))).toBeUndefined()
  })
})

describe('jsonBytes', () => {
  it('writes JSON.stringify’s bytes for any response-like object', () => {
    const value = fc.record(
      {
        compacted: fc.boolean(),
        messages: fc.array(fc.oneof(message, fc.constant(undefined)), { maxLength: 10 }),
        summary: fc.option(fc.record({ text })),
        gone: fc.constant(undefined)
      },
      { requiredKeys: [] }
    )
    fc.assert(
      fc.property(value, (v) => {
        expect(Buffer.from(jsonBytes(v)).toString('utf8')).toBe(JSON.stringify(v))
      }),
      { numRuns: 2_000 }
    )
  })

  it('writes a response of megabytes as JSON.stringify does', () => {
    const messages = Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 ? 'user' : 'assistant', content: `${'✓ é 🙂 "q" \\ '.repeat(i % 20)}${i}` }))
    const value = { compacted: true, messages, stats: { kept: 20_000 } }
    const out = jsonBytes(value)
    expect(out.length).toBeGreaterThan(1_000_000)
    expect(Buffer.from(out).equals(Buffer.from(JSON.stringify(value)))).toBe(true)
  })
})
