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
  const events = (bytes: Buffer): Buffer => Buffer.from(bytes.toString('utf8').split(/(?<=\r?\n\r?\n)/).map(rewrite).join(''))
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
