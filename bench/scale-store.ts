/**
 * `npx tsx bench/scale-store.ts`: the store at the scale of a busy team's few months. Seeds SQLite and
 * PostgreSQL (LOAD_PG_URL, or the machine's at 127.0.0.1:5432; `off` skips it) through the store's own
 * writes, with the cold-layer entries real compactions write (read from the corpus's transcripts), to
 * 100K, 1M and 2M entries (SCALE_SIZES), about a quarter of them in sessions at the 50,000-entry cap, and
 * 100,000 sessions listed under one key. At each size, through the gateway in a process of its own:
 *
 * - recall p50/p99 in a session of 500 entries and in one at the cap (targets 50 ms and 150 ms at p99),
 *   with /healthz asked every 10 ms meanwhile (target: every answer within 50 ms);
 * - deleting a session of 500 entries and one at the cap (targets 1 s and 5 s), while other requests
 *   (a recall, the list, a compaction that writes) are made every 20 ms (target: none waits over 100 ms);
 * - the list of 100,000 sessions, first pages and deep cursors (target p99 30 ms).
 *
 * Then the retention prune of a day's worth of entries (40,000), in the bench's process, with another
 * write asked every 10 ms (target: none waits over 100 ms: the prune's slices hold the writer that long at
 * most), and PostgreSQL's table sizes before and after.
 */
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { corpusDir, loadCorpus, progress, table } from './corpus.js'
import { fromBuild, scratchDir, startGateway } from './servers.js'

const { SqliteStore } = await fromBuild<typeof import('../src/storage/sqlite.js')>('storage/sqlite.js')
const { PostgresStore } = await fromBuild<typeof import('../src/storage/postgres.js')>('storage/postgres.js')
const { encodeCursor } = await fromBuild<typeof import('../src/storage/common.js')>('storage/common.js')
const { readMemory } = await fromBuild<typeof import('../src/memory/entries.js')>('memory/entries.js')
const { emptySections } = await fromBuild<typeof import('../src/compaction/index.js')>('compaction/index.js')
type Store = import('../src/storage/store.js').Store

const SIZES = (process.env.SCALE_SIZES ?? '100000,1000000,2000000').split(',').map(Number)
const PG_URL = process.env.LOAD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
/** Which stores to measure (`sqlite,postgres`). */
const STORES = (process.env.SCALE_STORES ?? 'sqlite,postgres').split(',')
const KEY_NAME = 'bench'
const API_KEY = 'bench-scale-key-000000000001'
const CAP = Number(process.env.SCALE_CAP ?? 50_000)
const LISTED = Number(process.env.SCALE_SESSIONS ?? 100_000)
/** Entries a compaction writes at once (a compaction of a long span writes a few hundred). */
const PER_COMPACTION = 250
const IN_FLIGHT = 8

// The entries real compactions write: each transcript's span read as the service reads it.
const POOL = loadCorpus(corpusDir(process.argv[2])).flatMap((t) => readMemory(t.messages, 0, { modified: [], read: [] }))
if (POOL.length === 0) throw new Error('no cold-layer entries read from the corpus')
const WORDS = wordCounts()
const COMMON = [...WORDS.entries()]
  .sort((a, b) => b[1] - a[1])
  .slice(0, 30)
  .map(([w]) => w)

function wordCounts(): Map<string, number> {
  const counts = new Map<string, number>()
  for (const e of POOL) for (const w of e.text.toLowerCase().match(/[a-z][a-z0-9_]{3,}/g) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1)
  return counts
}

let seed = 7
function random(): number {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed / 2_147_483_648
}
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T

/** A query as a person types it: two or three words of an entry, or common words of the corpus. */
function query(): string {
  if (random() < 0.3) return [pick(COMMON), pick(COMMON)].join(' ')
  const words = pick(POOL)
    .text.toLowerCase()
    .match(/[a-z][a-z0-9_]{3,}/g) ?? [pick(COMMON)]
  return Array.from({ length: 2 + Math.floor(random() * 2) }, () => pick(words)).join(' ')
}

const stats = {
  raw_history_tokens: 60_000,
  summary_tokens: 3_000,
  compacted_turns: 20,
  compacted_messages: 120,
  kept_messages: 30,
  kept_tokens: 20_000,
  context_after_compaction: 24_000,
  clipped_tool_results: 0,
  guard_added: 0,
  estimate_scale: 1,
  carried_context_tokens: 0,
  carried_context_dropped: 0
}
function record(id: string, session: string, at: number) {
  return {
    id,
    session_id: session,
    key_name: KEY_NAME,
    created_at: new Date(at).toISOString(),
    mode: 'auto' as const,
    reason: 'over_budget',
    budget_tokens: 40_000,
    stats,
    summarizer: { kind: 'extractive' as const, model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: 3 },
    doctrine_version: 'bench',
    summary: {
      text: `<compaction-summary id="${id}" version="1" compacted_turns="20">\n## Objective\n${pick(POOL).text}\n</compaction-summary>`,
      sections: emptySections()
    }
  }
}

let compactions = 0
/** Writes `entries` cold-layer entries of a session, a compaction's worth at a time, `IN_FLIGHT` writes at once. */
async function fillSession(store: Store, session: string, entries: number, at = Date.now()): Promise<void> {
  const writes: Promise<unknown>[] = []
  for (let done = 0; done < entries; done += PER_COMPACTION) {
    const n = Math.min(PER_COMPACTION, entries - done)
    const id = `cmp_seed_${compactions++}`
    writes.push(
      store.saveMemory(
        { compaction_id: id, session_id: session, key_name: KEY_NAME, created_at: new Date(at).toISOString() },
        Array.from({ length: n }, (_, k) => ({ ...pick(POOL), from: done + k, to: done + k }))
      )
    )
    if (writes.length >= IN_FLIGHT) await Promise.all(writes.splice(0))
  }
  await Promise.all(writes)
}

interface Row {
  what: string
  figure: string
  target: string
  meets: boolean
}
const rows: [string, string, ...Row[]][] = []
const row = (what: string, figure: string, target: string, meets: boolean): Row => ({ what, figure, target, meets })

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0
}
const ms = (v: number): string => `${v.toFixed(v < 10 ? 1 : 0)} ms`

/** Times of `fn` repeated every `everyMs` until `stop` resolves; their latencies. */
async function probe(stop: Promise<unknown>, everyMs: number, fn: () => Promise<void>): Promise<number[]> {
  const times: number[] = []
  let done = false
  void stop.finally(() => (done = true))
  while (!done) {
    const t = performance.now()
    await fn()
    times.push(performance.now() - t)
    await new Promise((r) => setTimeout(r, everyMs))
  }
  return times
}

async function measureStore(name: string, open: () => Store, db: string): Promise<void> {
  let store = open()
  let entries = 0
  let sessions = 0
  progress(`${name}: ${LISTED.toLocaleString()} sessions listed under one key`)
  {
    const writes: Promise<void>[] = []
    const start = Date.now() - LISTED * 1000
    for (let i = 0; i < LISTED; i++) {
      writes.push(store.saveRecord(record(`cmp_list_${i}`, `listed-${i}`, start + i * 1000)))
      if (writes.length >= IN_FLIGHT * 4) await Promise.all(writes.splice(0))
    }
    await Promise.all(writes)
  }
  await fillSession(store, 'five-hundred', 500)
  entries += 500
  for (const size of SIZES) {
    progress(`${name}: seeding to ${size.toLocaleString()} entries`)
    const t0 = performance.now()
    // a quarter at the cap, the two sessions the deletion takes, the rest in sessions of 100 to 1,000
    const capped = Math.max(1, Math.round((size - entries) / 4 / CAP))
    for (let c = 0; c < capped && entries + CAP < size; c++, entries += CAP) await fillSession(store, `cap-${size}-${c}`, CAP)
    await fillSession(store, `del-small-${size}`, 500)
    await fillSession(store, `del-cap-${size}`, CAP)
    entries += 500 + CAP
    while (entries < size) {
      const n = Math.min(size - entries, 100 + Math.floor(random() * 900))
      await fillSession(store, `s-${sessions++}`, n)
      entries += n
    }
    const seeded = (performance.now() - t0) / 1000
    await store.close()
    progress(`${name}: ${size.toLocaleString()} entries (seeded in ${seeded.toFixed(0)} s); measuring through the gateway`)
    const gateway = await startGateway({ COMPACT_DB: db, COMPACT_API_KEYS: `${KEY_NAME}=${API_KEY}`, COMPACT_RETENTION_DAYS: '3650' })
    const headers = { authorization: `Bearer ${API_KEY}` }
    const get = async (path: string): Promise<unknown> => {
      const res = await fetch(`${gateway.url}${path}`, { headers })
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
      return res.json()
    }
    const post = async (path: string, body: unknown): Promise<unknown> => {
      const res = await fetch(`${gateway.url}${path}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(body)
      })
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
      return res.json()
    }
    const recall = (session: string) => post(`/v1/sessions/${session}/recall`, { query: query(), limit: 10 })
    const results: Row[] = []
    try {
      // recall, with /healthz asked meanwhile
      const recallTimes: Record<string, number[]> = { 'five-hundred': [], [`cap-${SIZES[0]}-0`]: [] }
      let stopProbe!: () => void
      const probing = probe(new Promise<void>((r) => (stopProbe = r)), 10, async () => void (await fetch(`${gateway.url}/healthz`)).arrayBuffer())
      for (let i = 0; i < 200; i++) {
        for (const session of Object.keys(recallTimes)) {
          const t = performance.now()
          await recall(session)
          recallTimes[session]!.push(performance.now() - t)
        }
      }
      stopProbe()
      const health = await probing
      const small = recallTimes['five-hundred']!
      const cap = recallTimes[`cap-${SIZES[0]}-0`]!
      results.push(
        row('recall, session of 500: p50 / p99', `${ms(percentile(small, 50))} / ${ms(percentile(small, 99))}`, 'p99 ≤ 50 ms', percentile(small, 99) <= 50)
      )
      results.push(
        row('recall, session at the cap: p50 / p99', `${ms(percentile(cap, 50))} / ${ms(percentile(cap, 99))}`, 'p99 ≤ 150 ms', percentile(cap, 99) <= 150)
      )
      results.push(
        row(
          `/healthz during recalls (${health.length}): p99 / max`,
          `${ms(percentile(health, 99))} / ${ms(Math.max(...health))}`,
          'max ≤ 50 ms',
          Math.max(...health) <= 50
        )
      )

      // the list, first pages and deep cursors
      if (size === SIZES[0]) {
        const listTimes: number[] = []
        let cursor: string | null = null
        for (let i = 0; i < 100; i++) {
          const t = performance.now()
          const page = (await get(`/v1/sessions?limit=50${cursor ? `&cursor=${cursor}` : ''}`)) as { next_cursor: string | null }
          listTimes.push(performance.now() - t)
          cursor = page.next_cursor
        }
        for (let i = 0; i < 200; i++) {
          const t = performance.now()
          await get(`/v1/sessions?limit=50&cursor=${encodeCursor(1 + Math.floor(random() * LISTED))}`)
          listTimes.push(performance.now() - t)
        }
        results.push(
          row(
            `list of ${LISTED.toLocaleString()} sessions, pages and deep cursors: p50 / p99`,
            `${ms(percentile(listTimes, 50))} / ${ms(percentile(listTimes, 99))}`,
            'p99 ≤ 30 ms',
            percentile(listTimes, 99) <= 30
          )
        )
      }

      // deletion, with other requests made meanwhile
      for (const [session, target, label] of [
        [`del-small-${size}`, 1000, 'a session of 500'],
        [`del-cap-${size}`, 5000, 'a session at the cap']
      ] as const) {
        let n = 0
        const t = performance.now()
        const deleting = fetch(`${gateway.url}/v1/sessions/${session}`, { method: 'DELETE', headers }).then(async (res) => ({
          status: res.status,
          body: (await res.json()) as { deleted: { cold_layer: number } },
          ms: performance.now() - t
        }))
        const others = await probe(deleting, 20, async () => {
          const which = n++ % 3
          if (which === 0) await recall('five-hundred')
          else if (which === 1) await get('/v1/sessions?limit=20')
          else
            await post('/v1/compact', {
              mode: 'manual',
              session_id: `writer-${size}`,
              summarizer: 'extractive',
              messages: [
                { role: 'user', content: `fix the parser ${n}` },
                { role: 'assistant', content: 'looking at parser.py' },
                { role: 'user', content: 'go on' }
              ]
            })
        })
        const done = await deleting
        if (done.status !== 200) throw new Error(`DELETE ${session}: ${done.status}`)
        results.push(row(`delete ${label} (${done.body.deleted.cold_layer.toLocaleString()} entries)`, ms(done.ms), `≤ ${target / 1000} s`, done.ms <= target))
        results.push(row(`  other requests meanwhile (${others.length}): max`, ms(Math.max(0, ...others)), '≤ 100 ms', Math.max(0, ...others) <= 100))
      }
    } finally {
      await gateway.stop()
    }
    rows.push([name, entries.toLocaleString(), ...results])
    entries -= 500 + CAP
    store = open()
  }

  // the retention prune of a day's entries, with writes asked meanwhile
  progress(`${name}: the prune of a day's worth of entries`)
  const old = Date.now() - 40 * 86_400_000
  for (let i = 0; i < 160; i++) await fillSession(store, `old-${i}`, 250, old)
  const sizeBefore = await tableBytes(name)
  const t = performance.now()
  const pruning = store.prune(Date.now() - 30 * 86_400_000, Date.now())
  let k = 0
  const writes = await probe(pruning, 10, () => store.putState(`bench-probe-${k++}`, { k }, Date.now() + 60_000, { key_name: KEY_NAME, session_id: 'probe' }))
  const pruned = await pruning
  const pruneMs = performance.now() - t
  const sizeAfter = await tableBytes(name)
  rows.push([
    name,
    `${SIZES.at(-1)!.toLocaleString()} + prune`,
    row(`prune of ${pruned.memory.toLocaleString()} entries`, ms(pruneMs), '(no target)', true),
    row(`  writes meanwhile (${writes.length}): max`, ms(Math.max(0, ...writes)), '≤ 100 ms', Math.max(0, ...writes) <= 100),
    ...(sizeBefore === undefined
      ? []
      : [
          row(
            '  files (SQLite) or tables (PostgreSQL) before → after',
            `${mb(sizeBefore)} → ${mb(sizeAfter ?? 0)}`,
            'bytes given back',
            (sizeAfter ?? 0) < sizeBefore
          )
        ])
  ])
  await store.close()
}

const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MiB`
let pgClient: import('pg').Client | undefined
let pgSchema = ''
async function tableBytes(name: string): Promise<number | undefined> {
  if (name === 'SQLite') return statSync(sqlite).size + (existsSync(`${sqlite}-wal`) ? statSync(`${sqlite}-wal`).size : 0)
  if (!pgClient) return undefined
  const { rows: r } = await pgClient.query<{ n: string }>(
    `SELECT sum(pg_total_relation_size(c.oid)) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
    [pgSchema]
  )
  return Number(r[0]?.n ?? 0)
}

progress(`${POOL.length.toLocaleString()} cold-layer entries read from the corpus`)
const sqlite = join(scratchDir('cg-scale-'), 'compaction.db')
if (STORES.includes('sqlite')) await measureStore('SQLite', () => new SqliteStore(sqlite), sqlite)
if (PG_URL === 'off' || !STORES.includes('postgres')) console.log('PostgreSQL: skipped (LOAD_PG_URL=off or SCALE_STORES)')
else {
  const pg = await import('pg')
  pgSchema = `cg_bench_scale_${process.pid}`
  const url = `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${pgSchema}`
  pgClient = new pg.default.Client({ connectionString: PG_URL })
  await pgClient.connect()
  try {
    await measureStore('PostgreSQL', () => new PostgresStore(url), url)
  } finally {
    await pgClient.query(`DROP SCHEMA IF EXISTS ${pgSchema} CASCADE`)
    await pgClient.end()
  }
}

console.log(
  table(
    ['store', 'entries', 'measure', 'figure', 'target', ''],
    rows.flatMap(([store, size, ...results]) =>
      results.map((r) => [store, size, r.what, r.figure, r.target, r.target.startsWith('(') ? '' : r.meets ? 'meets' : 'misses'])
    )
  )
)
