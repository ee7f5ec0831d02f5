/**
 * `npm run bench` (last part): the wait at the crossing. A proxied session grows turn by turn past its
 * budget against a loopback model whose summaries take MODEL_DELAY_MS; the request that crosses the budget
 * is timed with precompute off (it waits for the summary) and at COMPACT_PRECOMPUTE_AT=0.75 (it takes the
 * summary written ahead). Target: with precompute the crossing waits ≤ 0.1x of the model's delay.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { type Message, promptTokens } from '../src/compaction/index.js'
import { buildApp } from '../src/server/app.js'
import { loadConfig } from '../src/server/config.js'
import { FakeAnthropic, type ReceivedRequest } from '../test/helpers/fake-anthropic.js'

const MODEL_DELAY_MS = Number(process.env.BENCH_MODEL_DELAY_MS ?? 2_000)
/** The client's own time between requests (reading the answer, running the tool). */
const THINK_MS = Number(process.env.BENCH_THINK_MS ?? 400)
const BUDGET = 20_000
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')

function history(steps: number): Message[] {
  const messages: Message[] = [{ role: 'user', content: 'Port the storage layer in src/storage to the new driver' }]
  for (let i = 0; i < steps; i++) {
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: `toolu_b_${i}`, name: 'bash', input: { command: `sed -n 1,120p src/storage/part_${i}.ts` } }] })
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_b_${i}`, content: `export const part${i} = ${JSON.stringify('z'.repeat(1_500))}` }] })
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `Part ${i} read.` }] })
    messages.push({ role: 'user', content: `Go on with part ${i + 1}` })
  }
  return messages
}

async function crossingWait(fake: FakeAnthropic, precomputeAt: string): Promise<{ waitMs: number; source: string }> {
  const app = await buildApp({
    config: loadConfig({
      ANTHROPIC_API_KEY: 'sk-ant-bench-proxy-00000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_DB: join(mkdtempSync(join(tmpdir(), 'cg-bench-proxy-')), 'bench.db'),
      COMPACT_PRECOMPUTE_AT: precomputeAt,
      COMPACT_SUMMARIZER_TIMEOUT_MS: String(MODEL_DELAY_MS * 5)
    }),
    logger: false
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/messages`
  try {
    let steps = 1
    while (promptTokens(history(steps), undefined, undefined) < 0.6 * BUDGET) steps++
    for (;;) {
      const messages = history(steps)
      const over = promptTokens(messages, undefined, undefined) > BUDGET
      const t0 = performance.now()
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-compaction-budget': String(BUDGET) },
        body: JSON.stringify({ model: 'claude-bench', max_tokens: 16, metadata: { user_id: `bench-${precomputeAt}` }, messages })
      })
      await res.arrayBuffer()
      const waitMs = performance.now() - t0
      if (over) {
        const text = await app.metrics.registry.getSingleMetricAsString('compaction_proxy_compactions_total')
        const source = text.split('\n').find((l) => l.startsWith('compaction_proxy_compactions_total{') && !l.endsWith(' 0'))?.match(/source="(\w+)"/)?.[1] ?? 'none'
        return { waitMs, source }
      }
      steps++
      await new Promise((r) => setTimeout(r, THINK_MS))
    }
  } finally {
    await app.close()
  }
}

export async function proxyBench(): Promise<void> {
  const fake = await new FakeAnthropic().start()
  fake.fallback = (r) => (isSummaryCall(r) ? { delayMs: MODEL_DELAY_MS, toolInput: { objective: 'Port the storage layer to the new driver' } } : { text: 'ok' })
  try {
    const without = await crossingWait(fake, 'off')
    const withPrecompute = await crossingWait(fake, '0.75')
    const ratio = withPrecompute.waitMs / MODEL_DELAY_MS
    console.log(`\nproxy: the request that crosses the budget (${BUDGET} tokens), the model taking ${MODEL_DELAY_MS} ms per summary, the client ${THINK_MS} ms between turns`)
    console.log(`  without precompute: ${without.waitMs.toFixed(0)} ms (compaction from ${without.source})`)
    console.log(`  with COMPACT_PRECOMPUTE_AT=0.75: ${withPrecompute.waitMs.toFixed(0)} ms (compaction from ${withPrecompute.source})`)
    console.log(`target: the crossing waits ≤ 0.1x the model's delay with precompute: ${ratio.toFixed(3)}x, ${ratio <= 0.1 ? 'meets' : 'misses'} (without: ${(without.waitMs / MODEL_DELAY_MS).toFixed(2)}x)`)
  } finally {
    await fake.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await proxyBench()
