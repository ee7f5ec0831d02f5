import { describe, expect, it } from 'vitest'
import { StoreUnavailableError } from '../../src/contract/errors.js'
import { ItemSeals } from '../../src/service/item-seals.js'

/** A store's firstState over one key: the first value offered is every later caller's. */
function keptBy(): { kept: (fresh: string) => Promise<unknown>; reads: () => number } {
  let value: string | undefined
  let reads = 0
  return {
    kept: async (fresh) => {
      reads++
      value ??= fresh
      return value
    },
    reads: () => reads
  }
}

const MASTER = new Uint8Array(32).fill(9)
const OTHER_MASTER = new Uint8Array(32).fill(4)

describe('the keys of compaction items', () => {
  it("without a master key, the store's secret: every replica of a store opens what another sealed, once it is read", async () => {
    const store = keptBy()
    const one = new ItemSeals({}, store.kept)
    const two = new ItemSeals({}, store.kept)
    await Promise.all([one.ready(), two.ready(), one.ready()])
    const sealed = one.for('alpha').seal('the compacted history')
    expect(two.for('alpha').open(sealed)).toBe('the compacted history')
    expect(two.for('beta').open(sealed)).toBeUndefined()
    // read once per process, not per request
    await one.ready()
    expect(store.reads()).toBe(2)
    // a store of its own: another secret, nothing opens
    const elsewhere = new ItemSeals({}, keptBy().kept)
    await elsewhere.ready()
    expect(elsewhere.for('alpha').open(sealed)).toBeUndefined()
  })

  it("without a master key and with the store away, refuses as the store's fault, and reads again on the next request", async () => {
    let away = true
    const store = keptBy()
    const seals = new ItemSeals({}, (fresh) => (away ? Promise.reject(new Error('connection refused')) : store.kept(fresh)))
    await expect(seals.ready()).rejects.toBeInstanceOf(StoreUnavailableError)
    expect(() => seals.for('alpha').seal('x')).toThrow(/before their keys were read/)
    away = false
    await seals.ready()
    expect(seals.for('alpha').open(seals.for('alpha').seal('x'))).toBe('x')
  })

  it('with a master key, seals under it without the store; opens what the store key sealed before, and what the previous master key sealed while a rotation runs', async () => {
    const store = keptBy()
    const before = new ItemSeals({}, store.kept)
    await before.ready()
    const old = before.for('alpha').seal('sealed before the master key came')

    const mastered = new ItemSeals({ current: MASTER }, store.kept)
    await mastered.ready()
    expect(mastered.for('alpha').open(old)).toBe('sealed before the master key came')
    const underMaster = mastered.for('alpha').seal('sealed under the master key')
    // the store's secret alone does not open it
    expect(before.for('alpha').open(underMaster)).toBeUndefined()

    const storeAway = new ItemSeals({ current: MASTER }, () => Promise.reject(new Error('connection refused')))
    await storeAway.ready()
    expect(storeAway.for('alpha').open(underMaster)).toBe('sealed under the master key')

    const rotated = new ItemSeals({ current: OTHER_MASTER, previous: [MASTER] }, store.kept)
    await rotated.ready()
    expect(rotated.for('alpha').open(underMaster)).toBe('sealed under the master key')
    expect(mastered.for('alpha').open(rotated.for('alpha').seal('new'))).toBeUndefined()
  })
})
