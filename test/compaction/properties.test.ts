import { describe, it } from 'vitest'
import { checkCompactionInvariants } from '../helpers/invariants.js'

describe('compaction invariants over generated histories', () => {
  it('hold for every history and setting, in auto mode', () => {
    checkCompactionInvariants('auto')
    // texts of megabytes make this one of the suite's longest tests; its time is no assertion, so it gets room
  }, 180_000)
})
