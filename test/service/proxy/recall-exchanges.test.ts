import { afterEach, describe, expect, it } from 'vitest'
import { RecallExchanges } from '../../../src/service/proxy/recall-exchanges.js'
import { SqliteStore } from '../../../src/storage/sqlite.js'
import type { RecallExchange } from '../../../src/proxy/recall-tool.js'
import { tempDb } from '../../helpers/process.js'

const stores: SqliteStore[] = []
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close()
})

const owner = { key_name: 'k', session_id: 's' }
const exchange = (visible: string, at = 1): RecallExchange => ({
  at,
  visible,
  rounds: [{ role: 'assistant', content: [{ type: 'text', text: visible }] }],
  pending: []
})

describe("a conversation's recall state", () => {
  it('is kept with the session: the next process reads the offer and the exchanges back, and the session’s deletion takes them', async () => {
    const path = tempDb()
    const first = new SqliteStore(path)
    stores.push(first)
    const faults: unknown[] = []
    const here = new RecallExchanges(first, (err) => faults.push(err))
    expect(await here.load('k\u0000s:s\u0000a')).toEqual({ offered: false, exchanges: [] })
    await here.offer('k\u0000s:s\u0000a', owner)
    await here.add('k\u0000s:s\u0000a', exchange('one'), owner)
    await here.add('k\u0000s:s\u0000a', exchange('two', 2), owner)
    // an answer at the same place again replaces its exchange
    await here.add('k\u0000s:s\u0000a', exchange('one'), owner)
    await first.close()
    stores.splice(0)

    const second = new SqliteStore(path)
    stores.push(second)
    const restarted = new RecallExchanges(second, (err) => faults.push(err))
    const state = await restarted.load('k\u0000s:s\u0000a')
    expect(state.offered).toBe(true)
    expect(state.exchanges.map((e) => e.visible)).toEqual(['two', 'one'])
    expect(await restarted.load('k\u0000s:s\u0000b')).toEqual({ offered: false, exchanges: [] })
    await second.deleteSession('s', 'k')
    restarted.forget('k\u0000s:s\u0000')
    expect(await restarted.load('k\u0000s:s\u0000a')).toEqual({ offered: false, exchanges: [] })
    expect(faults).toEqual([])
  })

  it('goes on from memory when the store fails, and says so', async () => {
    const faults: unknown[] = []
    const exchanges = new RecallExchanges(
      {
        shared: false,
        getState: () => Promise.reject(new Error('store down')),
        putState: () => Promise.reject(new Error('store down'))
      },
      (err) => faults.push(err)
    )
    await exchanges.add('c', exchange('kept in memory'), owner)
    expect((await exchanges.load('c')).exchanges.map((e) => e.visible)).toEqual(['kept in memory'])
    expect(faults.length).toBeGreaterThan(0)
  })
})
