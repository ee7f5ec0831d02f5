import type { ItemsField } from '../contract/wire.js'
import { readJson } from '../contract/validation.js'
import { InvalidRequestError } from '../contract/errors.js'
import { farUnderBudget, mayHoldFlatCost } from './request.js'

/** A proxied body: its bytes as they came (forwarded as they are when nothing is compacted), read only when needed. */
export class ProxiedBody {
  private parsed: unknown
  /** Whether its bytes may hold a block of a flat cost (an image, a document): searched once, when a budget first asks. */
  private flatCost: boolean | undefined

  constructor(
    readonly bytes: Buffer,
    flatCost?: boolean
  ) {
    this.flatCost = flatCost
  }

  /** Whether its bytes alone show it far under `quietTokens` (request.ts: farUnderBudget); the search for blocks of a flat cost is done once a body. */
  farUnder(quietTokens: number): boolean {
    return farUnderBudget(this.bytes, quietTokens, (bytes) => (this.flatCost ??= mayHoldFlatCost(bytes)))
  }

  /**
   * The body with bytes taken out of it (a field the gateway performed): what is known of its blocks goes
   * with it where taking bytes out cannot change it (no block of a flat cost in the whole, none in a part).
   */
  without(bytes: Buffer): ProxiedBody {
    return new ProxiedBody(bytes, this.flatCost === false ? false : undefined)
  }

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
