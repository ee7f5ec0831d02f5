/**
 * `npm run load`: a bounded loopback load run against the real server process on the extractive
 * summarizer: 2,000 compactions at concurrency 32 (LOAD_REQUESTS, LOAD_CONCURRENCY). It fails (exit 1)
 * on any error, or when the server's resident memory after the run is over 1.5x what it was before.
 */
import { corpusDir, loadCorpus } from './corpus.js'
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

// records are written as in production, to a database of the run's own; the log lines are read and dropped
const gateway = await startGateway()
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
console.log(`load: ${REQUESTS} compactions at concurrency ${CONCURRENCY} over loopback, extractive summarizer, ${bodies.length} corpus bodies`)
console.log(`  ${(REQUESTS / seconds).toFixed(0)} req/s over ${seconds.toFixed(1)} s; latency p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms, max ${pct(1)} ms`)
console.log(`  statuses ${JSON.stringify(Object.fromEntries(statuses))}; errors ${errors}`)
console.log(
  `  server rss ${before.toFixed(0)} MiB after warm-up, ${after.toFixed(0)} MiB at the end of the run (${(after / before).toFixed(2)}x), ${settled.toFixed(0)} MiB after ${SETTLE_MS / 1_000} s idle: ${growth.toFixed(2)}x (limit ${MAX_RSS_GROWTH}x)`
)
console.log(`  server exit code after SIGTERM: ${code}`)
if (errors > 0 || growth > MAX_RSS_GROWTH || code !== 0) process.exitCode = 1
