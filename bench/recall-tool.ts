/**
 * The proxy's recall tool (`npm run bench`, its part "recall tool"; or `tsx bench/recall-tool.ts` after
 * `npm run build`): a session through the Messages API proxy of the built gateway, in this process, against
 * the fake Messages API (its prompt cache simulated), whose model calls the recall tool once the tool is
 * offered and answers with what it found.
 *   - the gateway's own time in a recall round: from the fake's last event of the round that called the tool
 *     to the continuation's arrival at the fake (the search, the continuation's body, its sending; loopback
 *     included), p50 and p90 over the session's rounds; target p50 ≤ 20 ms;
 *   - the cache-read share of the session's requests with the tool offered (COMPACT_RECALL=auto) against the
 *     same session without it (off), in the same run; target within 2 points.
 */
import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { fromBuild } from './servers.js'
import { table } from './corpus.js'
import { FakeAnthropic, type FakeReply, type ReceivedRequest } from '../test/helpers/fake-anthropic.js'

const { buildApp } = await fromBuild<typeof import('../src/server/app.js')>('server/app.js')
const { loadConfig } = await fromBuild<typeof import('../src/server/config.js')>('server/config.js')

const TOOL = 'gateway_recall'
const TURNS = Number(process.env.BENCH_RECALL_TURNS ?? 80)
/** Every this many turns the user asks for something early in the session. */
const ASK_EVERY = 4

const offered = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === TOOL)
const lastBlocks = (r: ReceivedRequest): { type?: string; tool_use_id?: string }[] => {
  const c = r.body.messages.at(-1)?.content
  return Array.isArray(c) ? (c as { type?: string; tool_use_id?: string }[]) : []
}

interface Run {
  roundMs: number[]
  cacheShare: number
  requests: number
  refused: number
}

async function session(recall: 'auto' | 'off', modelCalls = true): Promise<Run> {
  const fake = await new FakeAnthropic().start()
  let calls = 0
  const ask = (r: ReceivedRequest): boolean => JSON.stringify(r.body.messages.at(-1) ?? null).includes('What was the early value')
  const roundMs: number[] = []
  fake.fallback = (r): FakeReply => {
    if (lastBlocks(r).some((b) => b.type === 'tool_result' && b.tool_use_id?.startsWith('toolu_recall'))) {
      // a continuation, as it arrives: the round before it ended with the fake's last event
      roundMs.push(performance.now() - fake.lastEventAt)
      return { text: 'Found it.' }
    }
    if (modelCalls && offered(r) && ask(r))
      return { content: [{ type: 'tool_use', id: `toolu_recall_${++calls}`, name: TOOL, input: { query: 'early value of step' } }] }
    return { text: 'Done.' }
  }
  const app = await buildApp({
    config: loadConfig({
      ANTHROPIC_API_KEY: 'sk-ant-bench-recall-000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_BUDGET: '20000',
      COMPACT_DB: ':memory:',
      COMPACT_RECALL: recall,
      COMPACT_RATE_LIMIT_PER_MIN: '1000000'
    }),
    logger: false
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const sdk = new Anthropic({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  const messages: Anthropic.Messages.MessageParam[] = []
  for (let t = 0; t < TURNS; t++) {
    const text =
      t % ASK_EVERY === ASK_EVERY - 1
        ? `What was the early value of step ${t - 20}?`
        : `Step ${t}: read this output.\n${Array.from({ length: 60 }, (_, i) => `step ${t} line ${i}: the early value of step ${t} is v${t}-${i}`).join('\n')}`
    messages.push({ role: 'user', content: [{ type: 'text', text, cache_control: { type: 'ephemeral' } }] })
    const stream = sdk.messages.stream({ model: 'claude-test', max_tokens: 256, messages }, { headers: { 'x-compaction-session': `bench-recall-${recall}` } })
    const final = await stream.finalMessage()
    // the client's history: its own messages as sent, without the cache mark, and the answer it got
    messages[messages.length - 1] = { role: 'user', content: text }
    messages.push({ role: 'assistant', content: final.content as Anthropic.Messages.ContentBlockParam[] })
  }
  const main = fake.requests.filter((r) => r.cache)
  const tokens = main.reduce((n, r) => n + (r.cache?.tokens ?? 0), 0)
  const read = main.reduce((n, r) => n + (r.cache?.read ?? 0), 0)
  await app.close()
  await fake.close()
  return { roundMs, cacheShare: read / Math.max(1, tokens), requests: fake.requests.length, refused: fake.refused.length }
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN
}
const verdict = (ok: boolean): string => (ok ? 'meets' : 'misses')

export async function recallToolBench(): Promise<void> {
  const on = await session('auto')
  const unused = await session('auto', false)
  const off = await session('off')
  console.log(
    `\nrecall tool: a ${TURNS}-turn session through the Messages proxy (budget 20,000), the user asking for an early value every ${ASK_EVERY} turns\n`
  )
  console.log(
    table(
      ['COMPACT_RECALL', 'requests', 'refused', 'recall rounds', 'gateway time a round p50', 'p90', 'cache-read share'],
      [
        [
          'auto',
          on.requests,
          on.refused,
          on.roundMs.length,
          `${quantile(on.roundMs, 0.5).toFixed(1)} ms`,
          `${quantile(on.roundMs, 0.9).toFixed(1)} ms`,
          `${(on.cacheShare * 100).toFixed(1)}%`
        ],
        ['auto, never called', unused.requests, unused.refused, 0, '-', '-', `${(unused.cacheShare * 100).toFixed(1)}%`],
        ['off', off.requests, off.refused, off.roundMs.length, '-', '-', `${(off.cacheShare * 100).toFixed(1)}%`]
      ]
    )
  )
  const p50 = quantile(on.roundMs, 0.5)
  console.log(`target: the gateway's own time in a recall round p50 ≤ 20 ms: ${p50.toFixed(1)} ms, ${verdict(p50 <= 20)}`)
  const gap = Math.abs(on.cacheShare - off.cacheShare) * 100
  const offered = Math.abs(unused.cacheShare - off.cacheShare) * 100
  console.log(
    `target: cache-read share with the tool within 2 points of without: ${offered.toFixed(1)} points with the tool offered and never called, ${gap.toFixed(1)} with it called every ${ASK_EVERY} turns (its results take room: more crossings), ${verdict(offered <= 2)} / ${verdict(gap <= 2)}`
  )
}

if (process.argv[1]?.endsWith('recall-tool.ts')) await recallToolBench()
