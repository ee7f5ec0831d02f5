import { Readable, type Transform } from 'node:stream'
import { text } from 'node:stream/consumers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { EventCuts, byEvents, lastEventEnd, topLevelField, wholeBody } from '../../src/proxy/events.js'

const through = async (chunks: string[], transform: Transform): Promise<string> => text(Readable.from(chunks.map((c) => Buffer.from(c))).pipe(transform))

describe('an answer rewritten as it passes', () => {
  it('finds the end of the last whole event, with LF or CRLF blank lines', () => {
    expect(lastEventEnd(Buffer.from('data: a\n\ndata: b'))).toBe(9)
    expect(lastEventEnd(Buffer.from('data: a\r\n\r\n'))).toBe(11)
    expect(lastEventEnd(Buffer.from('data: a\n'))).toBe(-1)
  })

  it('cuts a stream at its events: whole events as they complete, a part held, given up at the end', () => {
    const cuts = new EventCuts()
    expect(cuts.take(Buffer.from('data: a\n'))).toBeUndefined()
    expect(cuts.take(Buffer.from('\ndata: b'))?.toString()).toBe('data: a\n\n')
    expect(cuts.take(Buffer.from('\r\n\r\ndata: c'))?.toString()).toBe('data: b\r\n\r\n')
    expect(cuts.rest()?.toString()).toBe('data: c')
    expect(cuts.rest()).toBeUndefined()
  })

  it('rewrites each whole event once, however the stream is cut (emoji and all)', async () => {
    const events = ['event: a\ndata: {"n":1,"t":"😀"}\n\n', 'data: {"n":2}\r\n\r\n', 'event: c\ndata: {"n":3}\n\n']
    const whole = events.join('')
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: whole.length - 1 }), { maxLength: 6 }), async (cuts) => {
        const at = [...new Set(cuts)].sort((a, b) => a - b)
        const bytes = Buffer.from(whole)
        const chunks = [0, ...at.map((c) => Math.min(c, bytes.length)), bytes.length]
          .slice(0, -1)
          .map((from, i, all) => bytes.subarray(from, all[i + 1] ?? bytes.length).toString('latin1'))
        const seen: string[] = []
        const out = await text(Readable.from(chunks.map((c) => Buffer.from(c, 'latin1'))).pipe(byEvents((e) => (seen.push(e), e.toUpperCase()))))
        expect(seen).toEqual(events)
        expect(out).toBe(whole.toUpperCase())
      }),
      { numRuns: 50 }
    )
  })

  it('gives a body whole to its rewrite, or as it came', async () => {
    expect(
      await through(
        ['{"a":', '1}'],
        wholeBody((b) => Buffer.from(b.toString().replace('1', '2')))
      )
    ).toBe('{"a":2}')
    expect(
      await through(
        ['not ', 'json'],
        wholeBody(() => undefined)
      )
    ).toBe('not json')
  })
})

describe('a top-level field found in the bytes', () => {
  it('is taken out wherever it stands, whatever the other values hold (its own name in strings among them)', () => {
    const value = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.constant(null),
      fc.dictionary(fc.string(), fc.string()),
      fc.array(fc.oneof(fc.string(), fc.constant('"context_management"')))
    )
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string().filter((k) => k !== 'context_management'),
          value
        ),
        value,
        fc.nat(),
        fc.boolean(),
        (others, field, at, spaced) => {
          const entries = Object.entries(others)
          const place = at % (entries.length + 1)
          const withField = Object.fromEntries([...entries.slice(0, place), ['context_management', field], ...entries.slice(place)])
          const text = spaced ? JSON.stringify(withField, null, 2) : JSON.stringify(withField)
          const found = topLevelField(Buffer.from(text), 'context_management')
          expect(found).toBeDefined()
          expect(JSON.parse(found!.value.toString())).toEqual(field)
          expect(JSON.parse(found!.without.toString())).toEqual(others)
          expect(topLevelField(Buffer.from(JSON.stringify(others)), 'context_management')).toBeUndefined()
        }
      ),
      { numRuns: 300 }
    )
    // only the object's own field: one of the same name in a message is no top-level field
    expect(topLevelField(Buffer.from('{"messages":[{"context_management":1}]}'), 'context_management')).toBeUndefined()
    // nor one in a string, nor the name as a value; the object's own is found past them all, wherever it stands
    const decoys = { a: { context_management: 2 }, s: '"context_management": 3 \\', t: ['context_management'] }
    for (const order of [
      { ...decoys, context_management: { x: 1 } },
      { context_management: { x: 1 }, ...decoys },
      { a: decoys.a, context_management: { x: 1 }, s: decoys.s, t: decoys.t }
    ]) {
      const found = topLevelField(Buffer.from(JSON.stringify(order)), 'context_management')
      expect(JSON.parse(found!.value.toString())).toEqual({ x: 1 })
      expect(JSON.parse(found!.without.toString())).toEqual(decoys)
    }
    expect(topLevelField(Buffer.from(JSON.stringify(decoys)), 'context_management')).toBeUndefined()
  })

  it('given twice, is the last one, as JSON.parse reads the object', () => {
    const text = '{"context_management":{"edits":[]},"model":"m","context_management":{"x":2},"stream":true}'
    const found = topLevelField(Buffer.from(text), 'context_management')
    expect(JSON.parse(found!.value.toString())).toEqual((JSON.parse(text) as { context_management: unknown }).context_management)
  })
})
