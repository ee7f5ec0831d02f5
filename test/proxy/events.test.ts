import { Readable, type Transform } from 'node:stream'
import { text } from 'node:stream/consumers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { byEvents, lastEventEnd, wholeBody } from '../../src/proxy/events.js'

const through = async (chunks: string[], transform: Transform): Promise<string> => text(Readable.from(chunks.map((c) => Buffer.from(c))).pipe(transform))

describe('an answer rewritten as it passes', () => {
  it('finds the end of the last whole event, with LF or CRLF blank lines', () => {
    expect(lastEventEnd(Buffer.from('data: a\n\ndata: b'))).toBe(9)
    expect(lastEventEnd(Buffer.from('data: a\r\n\r\n'))).toBe(11)
    expect(lastEventEnd(Buffer.from('data: a\n'))).toBe(-1)
  })

  it('rewrites each whole event once, however the stream is cut (emoji and all)', async () => {
    const events = ['event: a\ndata: {"n":1,"t":"😀"}\n\n', 'data: {"n":2}\r\n\r\n', 'event: c\ndata: {"n":3}\n\n']
    const whole = events.join('')
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: whole.length - 1 }), { maxLength: 6 }), async (cuts) => {
        const at = [...new Set(cuts)].sort((a, b) => a - b)
        const bytes = Buffer.from(whole)
        const chunks = [0, ...at.map((c) => Math.min(c, bytes.length)), bytes.length].slice(0, -1).map((from, i, all) => bytes.subarray(from, all[i + 1] ?? bytes.length).toString('latin1'))
        const seen: string[] = []
        const out = await text(Readable.from(chunks.map((c) => Buffer.from(c, 'latin1'))).pipe(byEvents((e) => (seen.push(e), e.toUpperCase()))))
        expect(seen).toEqual(events)
        expect(out).toBe(whole.toUpperCase())
      }),
      { numRuns: 50 }
    )
  })

  it('gives a body whole to its rewrite, or as it came', async () => {
    expect(await through(['{"a":', '1}'], wholeBody((b) => Buffer.from(b.toString().replace('1', '2'))))).toBe('{"a":2}')
    expect(await through(['not ', 'json'], wholeBody(() => undefined))).toBe('not json')
  })
})
