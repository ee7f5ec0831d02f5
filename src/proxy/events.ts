/**
 * An answer's body rewritten as it passes: an event stream a whole event at a time (the bytes of an event
 * held until its blank line), or a JSON body once it is whole.
 */
import { Transform } from 'node:stream'

/** The end of the last complete event in `bytes` (after its blank line), or -1. */
export function lastEventEnd(bytes: Buffer): number {
  const lf = bytes.lastIndexOf('\n\n')
  const crlf = bytes.lastIndexOf('\r\n\r\n')
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 4)
}

/** Each run of whole events passed through `rewrite` (its text split at the events' blank lines), a part of one held for the next chunk. */
export function byEvents(rewrite: (event: string) => string): Transform {
  let held: Buffer = Buffer.alloc(0)
  const events = (bytes: Buffer): Buffer =>
    Buffer.from(
      bytes
        .toString('utf8')
        .split(/(?<=\r?\n\r?\n)/)
        .map(rewrite)
        .join('')
    )
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const bytes = held.length > 0 ? Buffer.concat([held, chunk]) : chunk
      const end = lastEventEnd(bytes)
      if (end < 0) {
        held = bytes
        return done()
      }
      held = bytes.subarray(end)
      done(null, events(bytes.subarray(0, end)))
    },
    flush(done) {
      done(null, held.length > 0 ? events(held) : undefined)
    }
  })
}

/** A body read whole, then given as `rewrite` makes it (undefined: as it came). */
export function wholeBody(rewrite: (bytes: Buffer) => Buffer | undefined): Transform {
  const chunks: Buffer[] = []
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      chunks.push(chunk)
      done()
    },
    flush(done) {
      const bytes = Buffer.concat(chunks)
      done(null, rewrite(bytes) ?? bytes)
    }
  })
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const OPEN = new Set([0x7b, 0x5b])
const CLOSE = new Set([0x7d, 0x5d])
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d])

/**
 * A top-level field of a JSON object's bytes, found without parsing the rest: its value's bytes and the
 * object's bytes without the field (its comma with it). One pass over the bytes, strings told apart; undefined
 * where the object has no such field (or the bytes are no object).
 */
export function topLevelField(bytes: Buffer, key: string): { value: Buffer; without: Buffer } | undefined {
  const name = Buffer.from(JSON.stringify(key))
  let i = 0
  while (i < bytes.length && SPACE.has(bytes[i] as number)) i++
  if (bytes[i] !== 0x7b) return undefined
  let depth = 0
  let expectKey = false
  let lastComma = -1
  for (; i < bytes.length; i++) {
    const c = bytes[i] as number
    if (c === QUOTE) {
      const start = i
      for (i++; i < bytes.length && bytes[i] !== QUOTE; i++) if (bytes[i] === BACKSLASH) i++
      if (depth === 1 && expectKey) {
        expectKey = false
        if (i + 1 - start === name.length && bytes.subarray(start, i + 1).equals(name)) {
          let v = i + 1
          while (v < bytes.length && (SPACE.has(bytes[v] as number) || bytes[v] === COLON)) v++
          const end = valueEnd(bytes, v)
          if (end < 0) return undefined
          const value = bytes.subarray(v, end)
          // the field and the comma before it (or, first in its object, the one after it)
          let after = end
          while (after < bytes.length && SPACE.has(bytes[after] as number)) after++
          const cut = lastComma >= 0 ? [lastComma, end] : bytes[after] === COMMA ? [start, after + 1] : [start, end]
          return { value, without: Buffer.concat([bytes.subarray(0, cut[0]), bytes.subarray(cut[1])]) }
        }
      }
      continue
    }
    if (OPEN.has(c)) {
      depth++
      if (depth === 1) expectKey = true
    } else if (CLOSE.has(c)) depth--
    else if (c === COMMA && depth === 1) {
      expectKey = true
      lastComma = i
    }
  }
  return undefined
}

/** Where the JSON value that starts at `from` ends (the index after it), or -1. */
function valueEnd(bytes: Buffer, from: number): number {
  let depth = 0
  for (let i = from; i < bytes.length; i++) {
    const c = bytes[i] as number
    if (c === QUOTE) {
      for (i++; i < bytes.length && bytes[i] !== QUOTE; i++) if (bytes[i] === BACKSLASH) i++
      if (depth === 0) return i + 1
      continue
    }
    if (OPEN.has(c)) depth++
    else if (CLOSE.has(c)) {
      if (depth === 0) return i
      depth--
      if (depth === 0) return i + 1
    } else if (depth === 0 && (c === COMMA || SPACE.has(c))) return i
  }
  return depth === 0 ? bytes.length : -1
}
