import { afterAll, describe, expect, it } from 'vitest'
import { PostgresStore } from '../../src/storage/postgres.js'
import { compactionRecord } from '../helpers/records.js'
import { dropSchemas, freshPgUrl, pgBehindRelay, pgMissing } from '../helpers/services.js'

describe.skipIf(pgMissing !== undefined)(`PostgreSQL connections reset under load${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, () => {
  afterAll(async () => dropSchemas())

  it('fail the writes in flight and leave the process up, every time; the store writes again once the database is back', async () => {
    const { url, relay } = await pgBehindRelay()
    const faults: Error[] = []
    const store = new PostgresStore(url, { onPoolError: (err) => faults.push(err) })
    const owner = (i: number) => ({ compaction_id: `cmp_${i}`, session_id: 's', key_name: 'k', created_at: new Date().toISOString() })
    const rows = Array.from({ length: 200 }, (_, i) => ({ kind: 'ask', text: `entry ${i} ${'x'.repeat(200)}`, from: i, to: i }))
    try {
      await store.saveMemory(owner(0), rows)
      let cut = 0
      for (let round = 0; round < 5; round++) {
        // transactions in flight on every connection of the pool, their connections cut under them
        const writes = Array.from({ length: 40 }, (_, i) => store.saveMemory(owner(round * 100 + i + 1), rows))
        await new Promise((r) => setTimeout(r, 5 + round * 7))
        await relay.down()
        const settled = await Promise.allSettled(writes)
        // each write either landed or failed with the connection's own error, never with another
        for (const r of settled)
          if (r.status === 'rejected') expect(String((r.reason as Error).message)).toMatch(/connect|terminat|ECONNRESET|closed|ended|timeout|socket/i)
        cut += settled.filter((r) => r.status === 'rejected').length
        await relay.up()
      }
      // the cuts reached writes in flight (else nothing here was tested)
      expect(cut).toBeGreaterThan(0)
      // the pool heals: a write after the faults lands
      await store.saveMemory(owner(9_999), rows.slice(0, 1))
      expect((await store.recall('s', 'k', { text: 'entry 0', limit: 5 })).length).toBeGreaterThan(0)
    } finally {
      await store.close()
      await relay.down().catch(() => undefined)
    }
  })

  it('keeps records, cold-layer entries and state whose text holds a NUL or a lone surrogate (sealed, they are bytes: a record and state keep them as they were, an entry a lone surrogate as U+FFFD)', async () => {
    const store = new PostgresStore(freshPgUrl())
    try {
      const odd = 'before\u0000after \ud83d lone, \\u0000 escaped, 😀 paired'
      await store.saveRecord(
        compactionRecord(
          'cmp_odd',
          's-odd',
          'k',
          new Date().toISOString(),
          `<compaction-summary id="cmp_odd" version="1" compacted_turns="1">\n## Objective\n${odd}\n</compaction-summary>`
        )
      )
      const page = await store.listRecords('s-odd', 'k', { limit: 5 })
      expect(page.records).toHaveLength(1)
      expect(page.records[0]!.summary.text).toContain(odd)
      await store.saveMemory({ compaction_id: 'cmp_odd', session_id: 's-odd', key_name: 'k', created_at: new Date().toISOString() }, [
        { kind: 'ask', text: odd, from: 0, to: 0 }
      ])
      expect((await store.recall('s-odd', 'k', { text: 'escaped paired', limit: 5 })).map((h) => h.text)).toEqual([odd.replace('\ud83d', '\ufffd')])
      await store.putState('state:odd', JSON.stringify({ text: odd }), Date.now() + 60_000)
      expect(JSON.parse((await store.getState('state:odd', Date.now())) as string)).toEqual({ text: odd })
    } finally {
      await store.close()
    }
  })
})
