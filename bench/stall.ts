/**
 * `npm run bench` (its last part): the event loop while a compaction redacts a long adversarial line, as a
 * real gateway process with a summary model (a loopback server answering as the Messages API does, after
 * 300 ms). Each body holds one tool output that is a single line of 1 MiB built to make a redaction pattern
 * work hard (test/helpers/adversarial.ts), in the span the model reads and the cold layer keeps. The figure is
 * the worst wait of /healthz, polled back to back, while the compaction runs: inline (COMPACT_WORKERS=0, the
 * baseline of the same run) and in workers (the default). Target: no stall over 20 ms with workers.
 */
import { type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ADVERSARIAL_LINES } from '../test/helpers/adversarial.js'
import { progress, table } from './corpus.js'
import { startGateway, worstStall } from './servers.js'

const LINE_BYTES = 1 << 20
const MODEL_MS = 300

/** A summary model on loopback: every request answered with a summary tool call after MODEL_MS. */
function fakeModel(): Server {
  let n = 0
  return createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      setTimeout(() => {
        n++
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            id: `msg_bench_${n}`,
            type: 'message',
            role: 'assistant',
            model: 'claude-bench',
            content: [{ type: 'tool_use', id: `toolu_bench_${n}`, name: 'record_summary', input: { objective: 'Find what the long output says' } }],
            stop_reason: 'tool_use',
            stop_sequence: null,
            usage: { input_tokens: 1_000, output_tokens: 50 }
          })
        )
      }, MODEL_MS)
    })
  })
}

/** A history whose span holds one tool output of `line`. */
function bodyWith(line: string, n: number): string {
  return JSON.stringify({
    mode: 'manual',
    messages: [
      { role: 'user', content: `Look at the build log (${n})` },
      { role: 'assistant', content: [{ type: 'tool_use', id: `toolu_${n}`, name: 'bash', input: { command: 'cat build.log' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${n}`, content: line }] },
      { role: 'assistant', content: 'The log is one long line.' },
      { role: 'user', content: 'What does it say?' }
    ]
  })
}

const model = fakeModel().listen(0, '127.0.0.1')
await new Promise((r) => model.once('listening', r))
const modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}`
const kinds = Object.entries(ADVERSARIAL_LINES)
const rows: { kind: string; inline?: number; workers: number; status: number }[] = []
for (const workers of ['0', '2']) {
  // inline only for the baseline's few kinds: it is what the figure is against, not the figure
  const these = workers === '0' ? kinds.filter(([k]) => ['SG. repeated', 'curl repeated', 'a quote never closed'].includes(k)) : kinds
  const gw = await startGateway({
    ANTHROPIC_API_KEY: 'sk-ant-bench-stall-000000000',
    ANTHROPIC_BASE_URL: modelUrl,
    COMPACT_WORKERS: workers,
    COMPACT_CACHE_TTL_S: '0'
  })
  // warm: the workers started and the pipeline compiled
  await (
    await fetch(`${gw.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodyWith('warm '.repeat(80_000), -1) })
  ).arrayBuffer()
  for (const [i, [kind, make]] of these.entries()) {
    progress(`the /healthz stall while a 1 MiB "${kind}" line is redacted, COMPACT_WORKERS=${workers}`)
    const body = Buffer.from(bodyWith(make(LINE_BYTES), i))
    let status = 0
    const work = fetch(`${gw.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (r) => {
      status = r.status
      await r.arrayBuffer()
    })
    const worst = await worstStall(gw.url, work)
    await work
    const row = rows.find((r) => r.kind === kind)
    if (workers === '0') rows.push({ kind, inline: worst, workers: NaN, status })
    else if (row) Object.assign(row, { workers: worst, status: Math.max(row.status, status) })
    else rows.push({ kind, workers: worst, status })
  }
  await gw.stop()
}
model.close()

console.log(`\nthe event loop while a 1 MiB adversarial line is redacted (a summary model answering in ${MODEL_MS} ms; worst /healthz wait, ms)\n`)
console.log(
  table(
    ['line', 'inline (COMPACT_WORKERS=0)', 'workers (default)', 'status'],
    rows.map((r) => [r.kind, r.inline === undefined ? '' : r.inline.toFixed(0), r.workers.toFixed(0), r.status])
  )
)
const worst = Math.max(...rows.map((r) => r.workers))
const baseline = Math.max(...rows.map((r) => r.inline ?? 0))
console.log(
  `target: no event-loop stall over 20 ms while redacting, with workers: worst ${worst.toFixed(0)} ms over ${rows.length} kinds (inline, the same run: ${baseline.toFixed(0)} ms), ${worst <= 20 ? 'meets' : 'misses'}`
)
if (rows.some((r) => r.status !== 200)) process.exitCode = 1
