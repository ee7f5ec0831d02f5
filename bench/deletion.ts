/**
 * `npx tsx bench/deletion.ts`: what deleting one session costs in a store of 10,000 records and 10,000
 * cold-layer entries (500 sessions), on SQLite and on PostgreSQL (LOAD_PG_URL, or the machine's at
 * 127.0.0.1:5432; `off` skips it): the rows' delete alone, against the whole deletion (the bytes zeroed
 * or the tables rewritten), in the same run. PostgreSQL's rewrite (VACUUM FULL) locks each table it
 * rewrites for as long as it takes: this is how long that is. No target: a figure for the README.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fromBuild } from './servers.js'

const { SqliteStore } = await fromBuild<typeof import('../src/storage/sqlite.js')>('storage/sqlite.js')
const { PostgresStore } = await fromBuild<typeof import('../src/storage/postgres.js')>('storage/postgres.js')
const { emptySections } = await fromBuild<typeof import('../src/compaction/index.js')>('compaction/index.js')

const RECORDS = 10_000
const SESSIONS = 500
const stats = { raw_history_tokens: 50_000, summary_tokens: 4_000, compacted_turns: 9, compacted_messages: 80, kept_messages: 20, kept_tokens: 15_000, context_after_compaction: 20_000, clipped_tool_results: 0, guard_added: 0, estimate_scale: 1, carried_context_tokens: 0, carried_context_dropped: 0 }
const record = (i: number) => ({
  id: `cmp_${i}`,
  session_id: `s${i % SESSIONS}`,
  key_name: 'bench',
  created_at: new Date().toISOString(),
  mode: 'auto' as const,
  reason: 'over_budget',
  stats,
  summarizer: { kind: 'extractive' as const, model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: 1 },
  doctrine_version: 'bench',
  summary: { text: `summary ${i} ${'words of a summary '.repeat(200)}`, sections: emptySections() }
})

type Store = InstanceType<typeof SqliteStore> | InstanceType<typeof PostgresStore>

async function fill(store: Store): Promise<void> {
  const writes: Promise<void>[] = []
  for (let i = 0; i < RECORDS; i++) {
    writes.push(store.saveRecord(record(i)))
    writes.push(store.saveMemory({ compaction_id: `cmp_${i}`, session_id: `s${i % SESSIONS}`, key_name: 'bench', created_at: new Date().toISOString() }, [{ kind: 'ask', text: `entry ${i} ${'cold layer text '.repeat(40)}`, from: 0, to: 0 }]))
    if (writes.length >= 200) await Promise.all(writes.splice(0))
  }
  await Promise.all(writes)
}

async function measure(name: string, open: () => Store, rowsOnly: (store: Store, session: string) => Promise<void>): Promise<void> {
  const store = open()
  await fill(store)
  let t = performance.now()
  await rowsOnly(store, 's1')
  const rows = performance.now() - t
  t = performance.now()
  const deleted = await store.deleteSession('s2', 'bench')
  const whole = performance.now() - t
  console.log(
    `${name}: one session of ${deleted.compactions} records and ${deleted.cold_layer} entries in a store of ${RECORDS}: its rows deleted ${rows.toFixed(0)} ms; deleted with its space reclaimed (${deleted.space_reclaimed}) ${whole.toFixed(0)} ms (${(whole / rows).toFixed(1)}x)`
  )
  await store.close()
}

await measure(
  'SQLite',
  () => new SqliteStore(join(mkdtempSync(join(tmpdir(), 'cg-delete-')), 'bench.db')),
  async (store) => {
    // the rows alone, on the store's own connection, as a delete without secure_delete or the WAL emptied would
    const db = (store as InstanceType<typeof SqliteStore>).connection
    db.pragma('secure_delete = OFF')
    db.transaction(() => {
      db.prepare("DELETE FROM compactions WHERE key_name = 'bench' AND session_id = 's1'").run()
      db.prepare("DELETE FROM memory WHERE key_name = 'bench' AND session_id = 's1'").run()
    })()
    db.pragma('secure_delete = ON')
  }
)
const pgUrl = process.env.LOAD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
if (pgUrl === 'off') console.log('PostgreSQL: skipped (LOAD_PG_URL=off)')
else {
  const schema = `cg_bench_delete_${process.pid}`
  const url = `${pgUrl}${pgUrl.includes('?') ? '&' : '?'}schema=${schema}`
  const pg = await import('pg')
  await measure(
    'PostgreSQL',
    () => new PostgresStore(url),
    async () => {
      const client = new pg.default.Client({ connectionString: pgUrl })
      await client.connect()
      await client.query(`DELETE FROM ${schema}.compactions WHERE key_name = 'bench' AND session_id = 's1'`)
      await client.query(`DELETE FROM ${schema}.memory WHERE key_name = 'bench' AND session_id = 's1'`)
      await client.end()
    }
  )
  const client = new pg.default.Client({ connectionString: pgUrl })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await client.end()
}
