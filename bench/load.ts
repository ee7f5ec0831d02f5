/**
 * `npm run load`: a bounded loopback load run against the real server process on the extractive
 * summarizer: 2,000 compactions at concurrency 32 (LOAD_REQUESTS, LOAD_CONCURRENCY) after 1,000 that warm
 * it up, with records and the cold layer in SQLite, then the same in PostgreSQL (LOAD_PG_URL,
 * the machine's by default; `off`, or a PostgreSQL that is not there, skips it with a line saying why),
 * printed side by side. It fails (exit 1) on any error, or when the server's resident memory after a run
 * is over 1.5x what it was after the warm-up.
 */
import { corpusDir, loadCorpus, progress } from './corpus.js'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { memoryMiB, startGateway } from './servers.js'

const REQUESTS = Number(process.env.LOAD_REQUESTS ?? 2_000)
const CONCURRENCY = Number(process.env.LOAD_CONCURRENCY ?? 32)
/** Enough requests at full concurrency for the server's heap to reach its working size. */
const WARMUP = 1_000
const MAX_RSS_GROWTH = 1.5
const SETTLE_MS = 3_000

const bodies = loadCorpus(corpusDir(process.argv[2]))
  .slice(0, 8)
  .map((t) => JSON.stringify({ messages: t.messages, system: t.system, mode: 'manual', session_id: `load-${t.name}` }))

const PG_URL = process.env.LOAD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

interface Figures {
  store: string
  rps: number
  p50: string
  p99: string
  max: string
  errors: number
  statuses: string
  before: number
  after: number
  settled: number
  growth: number
  code: number | null
}

async function loadRun(store: string, env: Record<string, string>): Promise<Figures> {
  // records are written as in production, to a database of the run's own; the log lines are read and dropped
  const gateway = await startGateway(env, process.env.GW_FLAGS ? process.env.GW_FLAGS.split(' ') : [])
  const child = gateway.child
  const url = `${gateway.url}/v1/compact`

  let errors = 0
  const statuses = new Map<number, number>()
  const latencies: number[] = []
  async function run(total: number): Promise<void> {
    let next = 0
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < total) {
          const body = bodies[next++ % bodies.length]!
          const t0 = performance.now()
          try {
            const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
            await res.arrayBuffer()
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
            if (res.status !== 200) errors++
          } catch {
            errors++
          }
          latencies.push(performance.now() - t0)
        }
      })
    )
  }

  await run(WARMUP)
  const before = memoryMiB(child.pid!).rss
  statuses.clear()
  latencies.length = 0
  errors = 0
  const t0 = performance.now()
  await run(REQUESTS)
  const seconds = (performance.now() - t0) / 1_000
  const after = memoryMiB(child.pid!).rss
  // Then idle for a moment, as a server between bursts is: V8's memory reducer collects when allocation stops.
  await new Promise((r) => setTimeout(r, SETTLE_MS))
  const settled = memoryMiB(child.pid!).rss
  const code = await gateway.stop()

  latencies.sort((a, b) => a - b)
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!.toFixed(1)
  const growth = settled / before
  return {
    store,
    rps: REQUESTS / seconds,
    p50: pct(0.5),
    p99: pct(0.99),
    max: pct(1),
    errors,
    statuses: JSON.stringify(Object.fromEntries(statuses)),
    before,
    after,
    settled,
    growth,
    code
  }
}

async function postgresSchema(): Promise<{ url: string; drop: () => Promise<void> } | string> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 1_500 })
  try {
    await client.connect()
  } catch (err) {
    return `PostgreSQL not reachable at ${PG_URL.replace(/\/\/[^@]*@/, '//')} (${(err as Error).message})`
  }
  const schema = `cg_load_${randomBytes(4).toString('hex')}`
  return {
    url: `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`,
    drop: async () => {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await client.end()
    }
  }
}

progress(`${REQUESTS} compactions at concurrency ${CONCURRENCY} on SQLite`)
const runs: Figures[] = [await loadRun('SQLite', {})]
const pgTarget = PG_URL === 'off' ? 'LOAD_PG_URL=off' : await postgresSchema()
if (typeof pgTarget === 'string') console.log(`load: PostgreSQL run skipped: ${pgTarget}`)
else {
  try {
    progress(`${REQUESTS} compactions at concurrency ${CONCURRENCY} on PostgreSQL`)
    runs.push(await loadRun('PostgreSQL', { COMPACT_DB: pgTarget.url }))
  } finally {
    await pgTarget.drop()
  }
}

console.log(
  `load: ${REQUESTS} compactions at concurrency ${CONCURRENCY} (after ${WARMUP} to warm up) over loopback, extractive summarizer, ${bodies.length} corpus bodies, records and cold layer kept`
)
const rows = [
  ['store', ...runs.map((r) => r.store)],
  ['req/s', ...runs.map((r) => r.rps.toFixed(0))],
  ['latency p50 ms', ...runs.map((r) => r.p50)],
  ['latency p99 ms', ...runs.map((r) => r.p99)],
  ['latency max ms', ...runs.map((r) => r.max)],
  ['statuses', ...runs.map((r) => r.statuses)],
  ['errors', ...runs.map((r) => String(r.errors))],
  ['rss after warm-up MiB', ...runs.map((r) => r.before.toFixed(0))],
  ['rss at the end MiB', ...runs.map((r) => r.after.toFixed(0))],
  [`rss after ${SETTLE_MS / 1_000} s idle MiB`, ...runs.map((r) => `${r.settled.toFixed(0)} (${r.growth.toFixed(2)}x, limit ${MAX_RSS_GROWTH}x)`)],
  ['exit code after SIGTERM', ...runs.map((r) => String(r.code))]
]
const width = rows.map((r) => r.map((c) => c.length)).reduce((w, r) => w.map((x, i) => Math.max(x, r[i] ?? 0)))
for (const row of rows) console.log(`  ${row.map((c, i) => c.padEnd(width[i]!)).join('  ')}`)
if (runs.length > 1) console.log(`  PostgreSQL throughput ${(runs[1]!.rps / runs[0]!.rps).toFixed(2)}x SQLite's`)
if (runs.some((r) => r.errors > 0 || r.growth > MAX_RSS_GROWTH || r.code !== 0)) process.exitCode = 1
