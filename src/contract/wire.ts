/**
 * JSON to and from bytes without one big string: a request body's bytes parsed message by message, and
 * a response encoded message by message.
 *
 * Decoding a whole body into one string puts that string, and every one like it, in fresh memory: V8
 * keeps strings over 128 KB apart, each on pages of its own that are mapped when the string is made and
 * returned when it dies, so a large history's decoding cost mostly the mapping of pages, several times
 * the decoding itself, and a 30 MB history touched thousands of pages at once. Here the top-level `messages` array is cut at its elements' commas and
 * each element is decoded and parsed on its own: small strings, in memory the runtime reuses.
 *
 * The answer is JSON.parse's, always: each piece goes through JSON.parse, and anything the cutter does
 * not recognize as plain (no `messages` array, a second one, an escaped top-level key, a piece that does
 * not parse) sends the whole body through JSON.parse instead, which also gives the error words and
 * position a client sees for a body that is not JSON.
 */
export function parseJsonBytes(bytes: Uint8Array, field: ItemsField = 'messages'): unknown {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const cuts = messageCuts(buffer, field)
  if (cuts) {
    try {
      return parseInPieces(buffer, cuts, field)
    } catch {
      // not plain after all: the whole body's parse decides, and words its error
    }
  }
  return JSON.parse(buffer.toString('utf8'))
}

/** Where the top-level `messages` array opens and closes, and the commas between its elements. */
export interface MessageCuts {
  open: number
  close: number
  commas: number[]
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
/** The top-level arrays a body's history may be (the Messages and Chat Completions APIs' `messages`, the Responses API's `input`). */
export type ItemsField = 'messages' | 'input' | 'contents'
/** Their keys, as bytes. */
const KEYS: Record<ItemsField, Buffer> = { messages: Buffer.from('"messages"'), input: Buffer.from('"input"'), contents: Buffer.from('"contents"') }

function isBlank(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

/**
 * One pass over the bytes, outside strings counting depth; undefined unless the body is an object with
 * one `messages` key, written plainly, whose value is an array. Bytes of multi-byte UTF-8 characters are
 * all 0x80 or above, so no byte of them is taken for a quote, a bracket or a comma.
 */
export function messageCuts(bytes: Buffer, field: ItemsField = 'messages'): MessageCuts | undefined {
  const key = KEYS[field]
  const n = bytes.length
  let depth = 0
  let open = -1
  let close = -1
  const commas: number[] = []
  for (let i = 0; i < n; i++) {
    const c = bytes[i] ?? 0 // i < n: always a byte
    if (c === QUOTE) {
      const start = i
      i = closingQuote(bytes, i + 1)
      if (depth !== 1) continue
      let j = i + 1
      while (isBlank(bytes[j])) j++
      if (bytes[j] !== COLON) continue // a top-level value
      // a top-level key: an escaped one might spell `messages`; only a plain `"messages"` opens the array
      if (bytes.subarray(start, i).includes(BACKSLASH)) return undefined
      if (i - start + 1 !== key.length || !key.equals(bytes.subarray(start, i + 1))) continue
      j++
      while (isBlank(bytes[j])) j++
      if (bytes[j] !== OPEN_BRACKET || open !== -1) return undefined
      open = j
      depth = 2
      i = j
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--
      if (depth === 1 && open !== -1 && close === -1) close = i
    } else if (c === COMMA && depth === 2 && open !== -1 && close === -1) {
      commas.push(i)
    }
  }
  return open !== -1 && close !== -1 ? { open, close, commas } : undefined
}

/**
 * The index of the quote that closes a string whose first byte is at `from` (the end of the bytes if none
 * does): the next quote not escaped, that is, not preceded by an odd run of backslashes. Long strings are
 * crossed by the runtime's byte search rather than byte by byte.
 */
export function closingQuote(bytes: Buffer, from: number): number {
  for (let q = bytes.indexOf(QUOTE, from); q !== -1; q = bytes.indexOf(QUOTE, q + 1)) {
    let k = q - 1
    while (k >= from && bytes[k] === BACKSLASH) k--
    if ((q - 1 - k) % 2 === 0) return q
  }
  return bytes.length
}

/**
 * The bytes each message of a body parsed in pieces came as, by the object parsed from them, and where a
 * body's messages array lies in its bytes. A message the service hands back or forwards unchanged is
 * written as these bytes, not stringified again: JSON.parse reads `12345678901234567890123` as
 * 1.2345678901234568e+22 and `1e400` as Infinity (null once stringified), and the client's own spacing
 * and escapes are its own too. The service never changes a message object in place (a clip makes a new
 * one), so the object being the same means the bytes are.
 */
const SENT = new WeakMap<object, Buffer>()
const BODIES = new WeakMap<object, { bytes: Buffer; open: number; close: number; field: ItemsField }>()

/** The piece of `bytes` between `from` and `to` with the blanks around it left out. */
function trimmed(bytes: Buffer, from: number, to: number): Buffer {
  while (from < to && isBlank(bytes[from])) from++
  while (to > from && isBlank(bytes[to - 1])) to--
  return bytes.subarray(from, to)
}

/** One message's piece parsed, and its bytes kept by the object it gave. */
function parsePiece(bytes: Buffer, from: number, to: number): unknown {
  const piece = trimmed(bytes, from, to)
  const value: unknown = JSON.parse(piece.toString('utf8'))
  if (typeof value === 'object' && value !== null) SENT.set(value, piece)
  return value
}

/** The body parsed piece by piece: the object with an empty array in place of the messages, then each element. */
function parseInPieces(bytes: Buffer, { open, close, commas }: MessageCuts, field: ItemsField): unknown {
  const outer: unknown = JSON.parse(`${bytes.toString('utf8', 0, open + 1)}${bytes.toString('utf8', close)}`)
  if (outer === null || typeof outer !== 'object' || Array.isArray(outer)) throw new Error('not an object')
  const messages: unknown[] = []
  let from = open + 1
  for (const comma of commas) {
    messages.push(parsePiece(bytes, from, comma))
    from = comma + 1
  }
  // an empty array has one blank piece and no commas; a blank piece after a comma is a trailing comma
  if (commas.length > 0 || trimmed(bytes, from, close).length > 0) messages.push(parsePiece(bytes, from, close))
  ;(outer as Record<string, unknown>)[field] = messages
  BODIES.set(outer, { bytes, open, close, field })
  return outer
}

/** A messages array's elements as JSON, each message the service did not change as the bytes it came as. */
function messageParts(messages: readonly unknown[]): (string | Buffer)[] {
  const parts: (string | Buffer)[] = []
  for (let i = 0; i < messages.length; i++) {
    if (i > 0) parts.push(',')
    const m = messages[i]
    const sent = typeof m === 'object' && m !== null ? SENT.get(m) : undefined
    parts.push(sent ?? JSON.stringify(m) ?? 'null')
  }
  return parts
}

/** Parts of text and bytes written into one buffer. */
function joined(parts: readonly (string | Buffer)[]): Buffer {
  let length = 0
  for (const part of parts) length += typeof part === 'string' ? Buffer.byteLength(part) : part.length
  // a zeroed Uint8Array's memory is reused from freed memory more often than Buffer.allocUnsafe's
  const out = Buffer.from(new Uint8Array(length).buffer)
  let at = 0
  for (const part of parts) at += typeof part === 'string' ? out.write(part, at) : part.copy(out, at)
  return out
}

/**
 * A request body with its messages replaced, as bytes: every byte of the body as it came but for the
 * messages array's elements, and of those every message left unchanged as it came. A body that was not
 * parsed in pieces is written whole by JSON.stringify.
 */
export function withMessages(body: object, messages: readonly unknown[], field: ItemsField = 'messages'): Buffer {
  const raw = BODIES.get(body)
  if (!raw || raw.field !== field) return Buffer.from(JSON.stringify({ ...body, [field]: messages }))
  return joined([raw.bytes.subarray(0, raw.open + 1), ...messageParts(messages), raw.bytes.subarray(raw.close)])
}

/**
 * `JSON.stringify(value)`'s UTF-8 bytes, written without making that string: each top-level value, and
 * each element of the `messages` array, is stringified on its own and written into one buffer, a
 * fraction of the time of one big string (see parseJsonBytes for why). For plain data (the service's
 * responses): no `toJSON`, no replacer. A message the client sent and the service left unchanged is
 * written as the bytes it came as (messageParts).
 */
export function jsonBytes(value: object): Uint8Array {
  const parts: (string | Buffer)[] = []
  for (const [key, v] of Object.entries(value)) {
    if (key === 'messages' && Array.isArray(v)) {
      parts.push(`${parts.length === 0 ? '{' : ','}"messages":[`, ...messageParts(v), ']')
      continue
    }
    const json = JSON.stringify(v) as string | undefined // undefined for what JSON leaves out of objects
    if (json !== undefined) parts.push(`${parts.length === 0 ? '{' : ','}${JSON.stringify(key)}:${json}`)
  }
  parts.push(parts.length === 0 ? '{}' : '}')
  return joined(parts)
}
