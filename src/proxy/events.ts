/**
 * An answer's body rewritten as it passes: an event stream a whole event at a time (the bytes of an event
 * held until its blank line), or a JSON body once it is whole.
 */
import { Transform } from 'node:stream'
import { closingQuote } from '../contract/wire.js'

/** The end of the last complete event in `bytes` (after its blank line), or -1. */
export function lastEventEnd(bytes: Buffer): number {
  const lf = bytes.lastIndexOf('\n\n')
  const crlf = bytes.lastIndexOf('\r\n\r\n')
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 4)
}

/** A stream's bytes cut at its events' ends: each chunk gives the whole events that came, a part of one held for the next. */
export class EventCuts {
  private held: Buffer = Buffer.alloc(0)

  /** The whole events `chunk` completes (undefined: none yet). */
  take(chunk: Buffer): Buffer | undefined {
    const bytes = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : chunk
    const end = lastEventEnd(bytes)
    if (end < 0) {
      this.held = bytes
      return undefined
    }
    this.held = bytes.subarray(end)
    return bytes.subarray(0, end)
  }

  /** What is held at the stream's end (an event without its blank line), given up. */
  rest(): Buffer | undefined {
    const rest = this.held
    this.held = Buffer.alloc(0)
    return rest.length > 0 ? rest : undefined
  }
}

/** Each run of whole events passed through `rewrite` (its text split at the events' blank lines), a part of one held for the next chunk. */
export function byEvents(rewrite: (event: string) => string): Transform {
  const cuts = new EventCuts()
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
      const whole = cuts.take(chunk)
      done(null, whole ? events(whole) : undefined)
    },
    flush(done) {
      const rest = cuts.rest()
      done(null, rest ? events(rest) : undefined)
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
 * object's bytes without the field (its comma with it); undefined where the object has no such field (or
 * the bytes are no object). The key's bytes are looked for with a native search; an occurrence is the key
 * itself where its quote is not escaped (inside a string it would be) and a colon follows, and it is at the
 * top level where the first close after its value that leaves its object is the body's last byte. The
 * occurrences are looked at from the last one back, and only what follows one is read, so a field near the
 * end (where clients put `context_management`) costs the bytes after it; given twice, the field is the last
 * one, as JSON.parse reads it.
 */
export function topLevelField(bytes: Buffer, key: string): { value: Buffer; without: Buffer } | undefined {
  const name = Buffer.from(JSON.stringify(key))
  let first = 0
  while (first < bytes.length && SPACE.has(bytes[first] as number)) first++
  if (bytes[first] !== 0x7b) return undefined
  let last = bytes.length - 1
  while (last > first && SPACE.has(bytes[last] as number)) last--
  for (let at = bytes.lastIndexOf(name); at > first; at = bytes.lastIndexOf(name, at - 1)) {
    let slashes = 0
    while (at - slashes - 1 >= 0 && bytes[at - slashes - 1] === BACKSLASH) slashes++
    if (slashes % 2 === 1) continue
    let v = skipSpaces(bytes, at + name.length)
    if (bytes[v] !== COLON) continue
    v = skipSpaces(bytes, v + 1)
    const end = valueEnd(bytes, v)
    if (end < 0) return undefined
    if (closeOf(bytes, end) !== last) continue
    // the field and the comma before it (or, first in its object, the one after it)
    let before = at - 1
    while (before > first && SPACE.has(bytes[before] as number)) before--
    const after = skipSpaces(bytes, end)
    const cut = bytes[before] === COMMA ? [before, end] : bytes[after] === COMMA ? [at, after + 1] : [at, end]
    return { value: bytes.subarray(v, end), without: Buffer.concat([bytes.subarray(0, cut[0]), bytes.subarray(cut[1])]) }
  }
  return undefined
}

function skipSpaces(bytes: Buffer, from: number): number {
  let i = from
  while (i < bytes.length && SPACE.has(bytes[i] as number)) i++
  return i
}

/** The index of the close that ends the object or array around `from` (outside any string), or -1. */
function closeOf(bytes: Buffer, from: number): number {
  let depth = 0
  for (let i = from; i < bytes.length; i++) {
    const c = bytes[i] as number
    if (c === QUOTE) i = closingQuote(bytes, i + 1)
    else if (OPEN.has(c)) depth++
    else if (CLOSE.has(c)) {
      if (depth === 0) return i
      depth--
    }
  }
  return -1
}

/** Where the JSON value that starts at `from` ends (the index after it), or -1. */
function valueEnd(bytes: Buffer, from: number): number {
  let depth = 0
  for (let i = from; i < bytes.length; i++) {
    const c = bytes[i] as number
    if (c === QUOTE) {
      i = closingQuote(bytes, i + 1)
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

/** One event of a stream, whole: its data (JSON) where it has any, and its raw text (what goes on where it is passed as it came). */
export interface DataEvent {
  data: Record<string, unknown> | undefined
  raw: string
}

/** The whole events of `text` (a run of them, cut at their blank lines), each with its `data:` lines read as JSON. */
export function dataEvents(text: string): DataEvent[] {
  return text
    .split(/(?<=\r?\n\r?\n)/)
    .filter((raw) => raw.trim() !== '')
    .map((raw) => {
      const data = raw
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n')
      try {
        return { data: data === '' ? undefined : (JSON.parse(data) as Record<string, unknown>), raw }
      } catch {
        return { data: undefined, raw }
      }
    })
}
