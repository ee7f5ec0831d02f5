/**
 * `npm run bench` (last part): the wait at the crossing, at three paces. A proxied session grows turn by turn
 * through CROSSINGS crossings of its budget against a loopback model: turns back to back with summaries of
 * 1.5 s, turns of 1.5 s with summaries of 8 s, and a summary model that never answers (its summaries given up
 * at the summarizer's timeout). Each crossing's wait is timed; the worst is reported against the summary's
 * time (the never-answering model's: the timeout a crossing would have waited out). Target: ≤ 0.05x at every pace.
 */
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { type Message, promptTokens } from '../src/compaction/index.js'
import { buildApp } from '../src/server/app.js'
import { scratchDir } from './servers.js'
import { loadConfig } from '../src/server/config.js'
import { FakeAnthropic, type FakeReply, type ReceivedRequest } from '../test/helpers/fake-anthropic.js'

const BUDGET = 20_000
const CROSSINGS = 3
/** A never-answering model's summaries are given up after this long: what a crossing that waited would have waited. */
const NEVER_TIMEOUT_MS = 20_000
const TARGET = 0.05
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')

interface Pace {
  name: string
  turnMs: number
  summaryMs: number | 'never'
}
const PACES: Pace[] = [
  { name: 'turns back to back, summaries of 1.5 s', turnMs: 0, summaryMs: 1_500 },
  { name: 'turns of 1.5 s, summaries of 8 s', turnMs: 1_500, summaryMs: 8_000 },
  { name: 'a summary model that never answers', turnMs: 0, summaryMs: 'never' }
]

function history(steps: number, tag: string): Message[] {
  const messages: Message[] = [{ role: 'user', content: `Port the storage layer in src/storage to the new driver (${tag})` }]
  for (let i = 0; i < steps; i++) {
    messages.push({
      role: 'assistant',
      content: [{ type: 'tool_use', id: `toolu_b_${i}`, name: 'bash', input: { command: `sed -n 1,120p src/storage/part_${i}.ts` } }]
    })
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: `toolu_b_${i}`, content: `export const part${i} = ${JSON.stringify('z'.repeat(5_000))}` }]
    })
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `Part ${i} read.` }] })
    messages.push({ role: 'user', content: `Go on with part ${i + 1}` })
  }
  return messages
}

/** One session at a pace through CROSSINGS crossings: each crossing's wait, and the summary calls made. */
async function atPace(pace: Pace): Promise<{ waits: number[]; summaryCalls: number }> {
  const fake = await new FakeAnthropic().start()
  const summary: FakeReply = pace.summaryMs === 'never' ? { after: new Promise(() => undefined) } : { delayMs: pace.summaryMs }
  fake.fallback = (r) => (isSummaryCall(r) ? { ...summary, toolInput: { objective: 'Port the storage layer to the new driver' } } : { text: 'ok' })
  const app = await buildApp({
    config: loadConfig({
      ANTHROPIC_API_KEY: 'sk-ant-bench-proxy-00000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_DB: join(scratchDir('cg-bench-proxy-'), 'bench.db'),
      COMPACT_SUMMARIZER_TIMEOUT_MS: String(NEVER_TIMEOUT_MS)
    }),
    logger: false
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/messages`
  const waits: number[] = []
  try {
    for (let steps = 1; waits.length < CROSSINGS; steps++) {
      const messages = history(steps, pace.name)
      const t0 = performance.now()
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-compaction-budget': String(BUDGET) },
        body: JSON.stringify({ model: 'claude-bench', max_tokens: 16, metadata: { user_id: `bench-${pace.name}` }, messages })
      })
      await res.arrayBuffer()
      if (res.headers.get('x-compaction') === 'compacted' && promptTokens(messages, undefined, undefined) > BUDGET) {
        const text = await app.metrics.registry.getSingleMetricAsString('compaction_crossing_wait_seconds')
        const count = Number(/compaction_crossing_wait_seconds_count (\d+)/.exec(text)?.[1] ?? 0)
        if (count > waits.length) waits.push(performance.now() - t0)
      }
      if (pace.turnMs > 0) await new Promise((r) => setTimeout(r, pace.turnMs))
    }
    return { waits, summaryCalls: fake.requests.filter(isSummaryCall).length }
  } finally {
    await app.close()
    await fake.close()
  }
}

export async function proxyBench(): Promise<void> {
  console.log(`\nproxy: the requests that cross the budget (${BUDGET} tokens), ${CROSSINGS} crossings a session, at three paces`)
  for (const pace of PACES) {
    const { waits, summaryCalls } = await atPace(pace)
    const summaryMs = pace.summaryMs === 'never' ? NEVER_TIMEOUT_MS : pace.summaryMs
    const ratio = Math.max(...waits) / summaryMs
    console.log(`  ${pace.name}: crossings waited ${waits.map((w) => w.toFixed(0)).join(', ')} ms; ${summaryCalls} summary calls`)
    console.log(`target: the worst crossing ≤ ${TARGET}x the summary's ${summaryMs} ms: ${ratio.toFixed(4)}x, ${ratio <= TARGET ? 'meets' : 'misses'}`)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await proxyBench()
