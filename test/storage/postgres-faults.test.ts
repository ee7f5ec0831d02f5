import { afterAll, describe, expect, it } from 'vitest'
import { PostgresStore } from '../../src/storage/postgres.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { PG_URL, dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

describe.skipIf(pgMissing !== undefined)(`PostgreSQL connections reset under load${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, () => {
  afterAll(async () => dropSchemas())

  it('fail the writes in flight and leave the process up, every time; the store writes again once the database is back', async () => {
    const target = new URL(PG_URL)
    const relay = await new TcpProxy(target.hostname, Number(target.port || 5432)).up()
    const url = new URL(freshPgUrl())
    url.host = `127.0.0.1:${relay.port}`
    const faults: Error[] = []
    const store = new PostgresStore(url.toString(), { onPoolError: (err) => faults.push(err) })
    const owner = (i: number) => ({ compaction_id: `cmp_${i}`, session_id: 's', key_name: 'k', created_at: new Date().toISOString() })
    const rows = Array.from({ length: 200 }, (_, i) => ({ kind: 'ask', text: `entry ${i} ${'x'.repeat(200)}`, from: i, to: i }))
    try {
      await store.saveMemory(owner(0), rows)
      for (let round = 0; round < 5; round++) {
        // transactions in flight on every connection of the pool, their connections cut under them
        const writes = Array.from({ length: 40 }, (_, i) => store.saveMemory(owner(round * 100 + i + 1), rows))
        await new Promise((r) => setTimeout(r, 5 + round * 7))
        await relay.down()
        const settled = await Promise.allSettled(writes)
        expect(settled.length).toBe(40)
        await relay.up()
      }
      // the pool heals: a write after the faults lands
      await store.saveMemory(owner(9_999), rows.slice(0, 1))
      expect((await store.recall('s', 'k', { text: 'entry 0', limit: 5 })).length).toBeGreaterThan(0)
    } finally {
      await store.close()
      await relay.down().catch(() => undefined)
    }
  })
})
