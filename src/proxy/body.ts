import type { ItemsField } from '../contract/wire.js'
import { readJson } from '../contract/validation.js'
import { InvalidRequestError } from '../contract/errors.js'

/** A proxied body: its bytes as they came (forwarded as they are when nothing is compacted), read only when needed. */
export class ProxiedBody {
  private parsed: unknown
  constructor(readonly bytes: Buffer) {}

  /** Its JSON, parsed once (`field`: the history's array, parsed element by element), or the 400 that says why it is not. */
  value(field: ItemsField = 'messages'): unknown {
    if (this.parsed === undefined) {
      const read = readJson(this.bytes, field)
      if (!read.ok) throw new InvalidRequestError(read.message, read.path)
      this.parsed = read.value
    }
    return this.parsed
  }
}
