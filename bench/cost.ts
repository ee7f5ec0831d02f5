/**
 * `npm run cost`: what a session costs through the proxy against what it costs sent straight upstream.
 * Each transcript of the corpus is replayed turn by turn as an agent sends it (its system prompt, the
 * history up to each of its model's turns, the newest message and the system prompt marked for the cache
 * as Claude Code marks them) to a loopback upstream that bills as the Messages API does: the prompt cache
 * up to breakpoints (20 blocks looked back), uncached input 1x, cache writes 1.25x, reads 0.1x, output
 * 5x. The gateway's own summary calls go to the same upstream and are billed with the sessions. Each turn
 * waits for the gateway's background work to settle (a summary as fast as the agent's turn: the pace that
 * uses the most written-ahead summaries).
 *
 * Summarizers: extractive (COMPACT_SUMMARIZER=extractive), the client's own model (no key of the
 * gateway's), the gateway's key (ANTHROPIC_API_KEY: the conversation's model writes the summaries with it,
 * the default), the gateway's own model (COMPACT_PROXY_SUMMARIES=gateway: COMPACT_MODEL from a transcript).
 * Budgets: 45,000 and 100,000. COST_ENV='{"COMPACT_LIMIT":"180000"}' makes the budget a target under that
 * limit (a crossing waits while it would not pay back), and reports the waits. Reported per
 * session and in total: billed input as a share of uncompacted (summary calls included), summary calls
 * per compaction, the largest prompt; each target with "meets" or "misses".
 */
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { type Message, isToolResult, readLedger, toolResultText } from '../src/compaction/index.js'
import { buildApp } from '../src/server/app.js'
import { scratchDir } from './servers.js'
import { PRICE } from '../src/service/costs.js'
import { loadConfig } from '../src/server/config.js'
import { FakeAnthropic, type ReceivedRequest } from '../test/helpers/fake-anthropic.js'
import { type Transcript, corpusDir, loadCorpus, progress, short, table } from './corpus.js'

const BUDGETS = process.env.COST_BUDGETS ? process.env.COST_BUDGETS.split(',').map(Number) : [45_000, 100_000]
// the prices the session cost estimate uses (input 1x, cache writes 1.25x, reads 0.1x, output 5x)
const { output: OUTPUT_PRICE, cache_write: CACHE_WRITE, cache_read: CACHE_READ } = PRICE
const mark = { type: 'ephemeral' }

type Mode = 'uncompacted' | 'extractive' | 'client model' | 'gateway key' | 'gateway model'
const ALL: Exclude<Mode, 'uncompacted'>[] = ['extractive', 'client model', 'gateway key', 'gateway model']
/** COST_MODES (comma-separated) and COST_BUDGETS narrow a run; COST_ENV (JSON) adds settings to the gateway's, to compare them. */
const SUMMARIZERS = process.env.COST_MODES ? ALL.filter((m) => process.env.COST_MODES!.split(',').includes(m)) : ALL

/** A summary call of the gateway's: its own (the summary tool) or in the client's conversation (the compaction request). */
const isSummaryCall = (r: ReceivedRequest): boolean =>
  (r.body.tools ?? []).some((t) => t.name === 'record_summary') || JSON.stringify(r.body.messages.at(-1) ?? null).includes('<compaction-request>')

/** A summary of about 1,500 tokens, as a model writes one. */
const SECTIONS = {
  objective: 'Carry on with the task the user set at the start of the session, as the summary of the turns so far records it.',
  files_modified: Array.from({ length: 12 }, (_, i) => `src/module_${i}.py — changed the handling of case ${i} and its tests`),
  files_inspected: Array.from({ length: 20 }, (_, i) => `src/reader_${i}.py`),
  key_decisions: Array.from({ length: 10 }, (_, i) => `Decision ${i}: keep the public interface stable and fix the cause at its source, not its symptom`),
  failing_tests_and_errors: Array.from(
    { length: 8 },
    (_, i) => `tests/test_case_${i}.py::test_${i} failed with AssertionError before the fix; passes after it`
  ),
  next_steps: Array.from({ length: 6 }, (_, i) => `Step ${i}: run the suite again and check the remaining failures`)
}

/** The requests an agent sends over a transcript: before each of its model's turns, the history so far. */
function turns(t: Transcript): { system: unknown; messages: Message[] }[] {
  const system = t.system ? [{ type: 'text', text: t.system, cache_control: mark }] : undefined
  const out: { system: unknown; messages: Message[] }[] = []
  t.messages.forEach((m, i) => {
    if (m.role !== 'assistant' || i === 0 || t.messages[i - 1]!.role !== 'user') return
    const messages = t.messages.slice(0, i)
    const last = messages[i - 1]!
    const blocks = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content
    if (blocks.length === 0) return
    messages[i - 1] = { ...last, content: [...blocks.slice(0, -1), { ...blocks[blocks.length - 1]!, cache_control: mark }] }
    out.push({ system, messages })
  })
  return out
}

interface Bill {
  /** Crossings: requests whose prompt is smaller than the one before (whatever did it: a summary, clearing). */
  crossings: number
  /** The transcript's facts (files changed, commands run, failing tests, the user's requests) at its last turn: in the prompt sent, or found by recall in the cold layer. */
  facts: { total: number; inPrompt: number; recalled: number }
  /** Plain lines of its tool outputs, the same way. */
  lines: { total: number; inPrompt: number; recalled: number }
  /** Billed input units: uncached 1x, writes 1.25x, reads 0.1x (the summary calls' included). */
  input: number
  /** Billed output units (5x a token). */
  output: number
  summaryCalls: number
  compactions: number
  largestPrompt: number
  /** The last request's prompt (tokens). */
  lastPrompt: number
  refused: number
  /** The summary calls' input tokens, and those of them read from the cache. */
  summaryInput: number
  summaryRead: number
  /** The prompt cache around the proxied compactions, as the gateway's overview sums it from the upstream's usage. */
  cache: Record<string, number>
  /** The session's compactions, and those whose record has its cache figures. */
  recorded: number
  withCache: number
  /** Under COMPACT_LIMIT: requests forwarded over the budget uncompacted (a compaction would not have paid back), and why each compaction was made when it was. */
  waited: number
  because: Record<string, number>
}

function bill(requests: ReceivedRequest[], compactions: number, refused: number, facts: Bill['facts'], lines: Bill['lines']): Bill {
  const b: Bill = {
    crossings: 0,
    facts,
    lines,
    input: 0,
    output: 0,
    summaryCalls: 0,
    compactions,
    largestPrompt: 0,
    lastPrompt: 0,
    refused,
    summaryInput: 0,
    summaryRead: 0,
    cache: {},
    recorded: 0,
    withCache: 0,
    waited: 0,
    because: {}
  }
  let previous = 0
  for (const r of requests) {
    if (!isSummaryCall(r) && r.cache) {
      if (r.cache.tokens < previous) b.crossings++
      previous = r.cache.tokens
    }
    const c = r.cache
    if (!c) continue
    b.input += c.tokens - c.read - c.written + CACHE_WRITE * c.written + CACHE_READ * c.read
    if (isSummaryCall(r)) {
      b.summaryCalls++
      b.summaryInput += c.tokens
      b.summaryRead += c.read
      b.output += OUTPUT_PRICE * Math.ceil(JSON.stringify(SECTIONS).length / 4)
    } else {
      b.output += OUTPUT_PRICE * 2
      b.largestPrompt = Math.max(b.largestPrompt, c.tokens)
      b.lastPrompt = c.tokens
    }
  }
  return b
}

/**
 * The facts of a transcript an agent needs to go on, read from it by the ledger: the files it changed, the
 * commands it ran, the tests it saw fail and the user's requests, each as a short string to look for.
 */
function factsOf(messages: Message[]): string[] {
  const ledger = readLedger(messages)
  const facts = [
    ...ledger.filesModified.map((f) => f.path),
    ...ledger.commands.map((c) => c.command.slice(0, 60)),
    ...ledger.tests.filter((t) => t.status !== 'passed').map((t) => t.id),
    ...ledger.userRequests.map((r) => r.text.slice(0, 60))
  ]
  return [...new Set(facts.map((f) => f.trim()).filter((f) => f.length >= 4))]
}

/**
 * Plain lines of the transcript's tool outputs (a value a command printed, a line of a file read), which no
 * ledger reads: the middle line of four words or more of every fifth output, as a task would need one back.
 */
function outputLinesOf(messages: Message[]): string[] {
  const outputs = messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.flatMap((b) => (isToolResult(b) ? [toolResultText(b)] : []))))
  const lines = outputs
    .filter((_, k) => k % 5 === 2)
    .map((out) => {
      const candidates = out
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l.length <= 200 && l.split(/\W+/).filter((w) => w.length >= 2).length >= 4)
      return candidates[Math.floor(candidates.length / 2)]
    })
  return [...new Set(lines.filter((l): l is string => l !== undefined))]
}

/** Which facts the last prompt holds (its JSON), and which of the others a recall of the session finds (its five best passages). */
async function factsKept(app: Awaited<ReturnType<typeof buildApp>> | undefined, session: string, facts: string[], lastPrompt: string): Promise<Bill['facts']> {
  const kept = { total: facts.length, inPrompt: 0, recalled: 0 }
  for (const fact of facts) {
    if (lastPrompt.includes(JSON.stringify(fact).slice(1, -1))) {
      kept.inPrompt++
      continue
    }
    if (!app) continue
    const res = await app.inject({
      method: 'POST',
      url: `/v1/sessions/${encodeURIComponent(session)}/recall`,
      payload: { query: fact.slice(0, 200), limit: 5 }
    })
    if (res.statusCode === 200 && res.json<{ results: { text: string }[] }>().results.some((h) => h.text.includes(fact))) kept.recalled++
  }
  return kept
}

/** One transcript replayed through the gateway (or straight to the upstream), billed. */
async function replay(t: Transcript, mode: Mode, budget: number): Promise<Bill> {
  const fake = await new FakeAnthropic().start()
  fake.fallback = (r) => {
    if ((r.body.tools ?? []).some((tool) => tool.name === 'record_summary')) return { toolInput: SECTIONS }
    if (isSummaryCall(r)) return { text: JSON.stringify(SECTIONS) }
    return { text: 'ok' }
  }
  const env: Record<string, string> = {
    ANTHROPIC_BASE_URL: fake.url,
    COMPACT_DB: join(scratchDir('cg-cost-'), 'cost.db'),
    COMPACT_BUDGET: String(budget),
    COMPACT_CACHE_TTL_S: '0',
    COMPACT_RATE_LIMIT_PER_MIN: '1000000',
    ...(JSON.parse(process.env.COST_ENV ?? '{}') as Record<string, string>)
  }
  if (mode === 'extractive') env.COMPACT_SUMMARIZER = 'extractive'
  if (mode === 'gateway key' || mode === 'gateway model') env.ANTHROPIC_API_KEY = 'sk-ant-cost-gateway-key-0000000000'
  if (mode === 'gateway model') env.COMPACT_PROXY_SUMMARIES = 'gateway'
  const app = mode === 'uncompacted' ? undefined : await buildApp({ config: loadConfig(env), logger: false })
  let url = `${fake.url}/v1/messages`
  if (app) {
    await app.listen({ port: 0, host: '127.0.0.1' })
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/messages`
  }
  let compactions = 0
  let lastSummary: string | null = null
  let facts: Bill['facts'] = { total: 0, inPrompt: 0, recalled: 0 }
  let lines: Bill['lines'] = { total: 0, inPrompt: 0, recalled: 0 }
  const around = { cache: {} as Record<string, number>, recorded: 0, withCache: 0, waited: 0, because: {} as Record<string, number> }
  try {
    for (const turn of turns(t)) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-cost-client-key-00000000000', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({
          model: 'claude-cost',
          max_tokens: 1_024,
          ...(turn.system ? { system: turn.system } : {}),
          messages: turn.messages,
          metadata: { user_id: `cost-${t.name}` }
        })
      })
      await res.arrayBuffer()
      if (res.headers.get('x-compaction') === 'compacted' && res.headers.get('x-compaction-summary-id') !== lastSummary) compactions++
      lastSummary = res.headers.get('x-compaction-summary-id')
      await app?.proxy.compactor.idle()
    }
    const last = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)
    await app?.store.drain()
    facts = await factsKept(app, `cost-${t.name}`, factsOf(t.messages), last?.raw ?? '')
    lines = await factsKept(app, `cost-${t.name}`, outputLinesOf(t.messages), last?.raw ?? '')
    if (app) {
      // the cache around each compaction, as the gateway keeps it from the upstream's usage
      around.cache = (await app.inject({ url: '/v1/overview' })).json<{ compaction_cache: Record<string, number> }>().compaction_cache
      const session = encodeURIComponent(`cost-${t.name}`)
      const listed = (await app.inject({ url: `/v1/sessions/${session}/compactions?limit=100` })).json<{ compactions?: { id: string }[] }>().compactions ?? []
      for (const c of listed) {
        around.recorded++
        const detail = (await app.inject({ url: `/v1/sessions/${session}/compactions/${c.id}` })).json<{
          cache: unknown
          compaction: { crossing?: { because: string } }
        }>()
        if (detail.cache !== null && detail.cache !== undefined) around.withCache++
        const because = detail.compaction.crossing?.because
        if (because) around.because[because] = (around.because[because] ?? 0) + 1
      }
      const metrics = await app.metrics.registry.getSingleMetricAsString('compaction_proxy_crossings_waited_total')
      around.waited = Number(/compaction_proxy_crossings_waited_total (\d+)/.exec(metrics)?.[1] ?? 0)
    }
  } finally {
    await app?.close()
    await fake.close()
  }
  return { ...bill(fake.requests, compactions, fake.refused.length, facts, lines), ...around }
}
const verdict = (ok: boolean): string => (ok ? 'meets' : 'misses')
const pct = (x: number): string => `${(100 * x).toFixed(0)}%`

const transcripts = loadCorpus(corpusDir(process.argv[2])).slice(0, Number(process.env.COST_SESSIONS ?? Infinity))
const base = new Map<string, Bill>()
for (const [i, t] of transcripts.entries()) {
  progress(`uncompacted ${i + 1}/${transcripts.length} ${t.name}`)
  base.set(t.name, await replay(t, 'uncompacted', BUDGETS[0]!))
}

console.log(
  `cost: ${transcripts.length} transcripts replayed turn by turn; billed input (uncached 1x, cache writes ${CACHE_WRITE}x, reads ${CACHE_READ}x) as a share of the same sessions sent straight upstream; output at ${OUTPUT_PRICE}x`
)
const refusedBase = [...base.values()].reduce((n, b) => n + b.refused, 0)
if (refusedBase > 0) console.log(`(the upstream refused ${refusedBase} of the uncompacted requests as the API would)`)
for (const budget of BUDGETS) {
  const results = new Map<Mode, Map<string, Bill>>()
  for (const mode of SUMMARIZERS) {
    const bills = new Map<string, Bill>()
    for (const [i, t] of transcripts.entries()) {
      progress(`${mode} at ${budget}: ${i + 1}/${transcripts.length} ${t.name}`)
      bills.set(t.name, await replay(t, mode, budget))
    }
    results.set(mode, bills)
  }
  console.log(`\nbudget ${budget.toLocaleString('en')} tokens`)
  const rows = transcripts.map((t) => {
    const b = base.get(t.name)!
    return [
      short(t.name, 40),
      b.largestPrompt.toLocaleString('en'),
      ...SUMMARIZERS.flatMap((m) => {
        const r = results.get(m)!.get(t.name)!
        return [pct(r.input / b.input), `${r.compactions}/${r.summaryCalls}`]
      })
    ]
  })
  console.log(table(['session', 'largest prompt', ...SUMMARIZERS.flatMap((m) => [m, 'crossings/calls'])], rows))
  const total = (bills: Map<string, Bill>, key: 'input' | 'output'): number => [...bills.values()].reduce((n, b) => n + b[key], 0)
  const baseInput = total(base, 'input')
  const baseAll = baseInput + total(base, 'output')
  for (const mode of SUMMARIZERS) {
    const bills = results.get(mode)!
    const share = total(bills, 'input') / baseInput
    const withOutput = (total(bills, 'input') + total(bills, 'output')) / baseAll
    const over = transcripts.filter((t) => bills.get(t.name)!.input > base.get(t.name)!.input)
    const calls = [...bills.values()].reduce((n, b) => n + b.summaryCalls, 0)
    const crossings = [...bills.values()].reduce((n, b) => n + b.compactions, 0)
    const largest = Math.max(...[...bills.values()].map((b) => b.largestPrompt))
    const refused = [...bills.values()].reduce((n, b) => n + b.refused, 0)
    const crossed = [...bills.values()].reduce((n, b) => n + b.crossings, 0)
    const f = [...bills.values()].reduce(
      (a, b) => ({ total: a.total + b.facts.total, inPrompt: a.inPrompt + b.facts.inPrompt, recalled: a.recalled + b.facts.recalled }),
      { total: 0, inPrompt: 0, recalled: 0 }
    )
    const l = [...bills.values()].reduce(
      (a, b) => ({ total: a.total + b.lines.total, inPrompt: a.inPrompt + b.lines.inPrompt, recalled: a.recalled + b.lines.recalled }),
      { total: 0, inPrompt: 0, recalled: 0 }
    )
    const tokensAfter = [...bills.values()].reduce((n, b) => n + b.lastPrompt, 0)
    console.log(
      `${mode}: billed input ${pct(share)} of uncompacted (${pct(withOutput)} with output); ${crossings} compactions, ${calls} summary calls, ${crossed} crossings (${(crossed / transcripts.length).toFixed(2)} a session); largest prompt ${largest.toLocaleString('en')} tokens; last prompts ${tokensAfter.toLocaleString('en')} tokens in all (${pct(tokensAfter / [...base.values()].reduce((n, b) => n + b.lastPrompt, 0))} of uncompacted); facts at the last turn: ${pct(f.inPrompt / Math.max(1, f.total))} in the prompt, ${pct((f.inPrompt + f.recalled) / Math.max(1, f.total))} in the prompt or recalled (${f.total} facts)${refused ? `; ${refused} requests refused` : ''}`
    )
    {
      const reached = (f.inPrompt + f.recalled + l.inPrompt + l.recalled) / Math.max(1, f.total + l.total)
      console.log(
        `target: facts reachable (in the prompt or in one recall's five best passages), plain output lines counted: ${pct(reached)} (${f.total} facts, ${l.total} output lines: ${pct((l.inPrompt + l.recalled) / Math.max(1, l.total))} of the lines), ${verdict(reached >= 0.99)}`
      )
    }
    console.log(
      `target: no session above 100%: ${over.length === 0 ? 'none' : over.map((t) => `${short(t.name, 30)} ${pct(bills.get(t.name)!.input / base.get(t.name)!.input)}`).join(', ')}, ${verdict(over.length === 0)}`
    )
    {
      const sum = (key: string): number => [...bills.values()].reduce((n, b) => n + (b.cache[key] ?? 0), 0)
      const recorded = [...bills.values()].reduce((n, b) => n + b.recorded, 0)
      const withCache = [...bills.values()].reduce((n, b) => n + b.withCache, 0)
      console.log(
        `the prompt cache around the compactions (GET /v1/overview): crossing requests read ${sum('crossing_read').toLocaleString('en')} and wrote ${sum('crossing_written').toLocaleString('en')} tokens, invalidated ${sum('invalidated').toLocaleString('en')}; the ${sum('after_requests')} requests after them read ${sum('after_read').toLocaleString('en')} and wrote ${sum('after_written').toLocaleString('en')}`
      )
      console.log(`target: the cache figures on every compaction: ${withCache} of ${recorded}, ${verdict(withCache === recorded)}`)
    }
    if (process.env.COST_ENV?.includes('COMPACT_LIMIT')) {
      const waited = [...bills.values()].reduce((n, b) => n + b.waited, 0)
      const because: Record<string, number> = {}
      for (const b of bills.values()) for (const [k, n] of Object.entries(b.because)) because[k] = (because[k] ?? 0) + n
      console.log(
        `crossings under COMPACT_LIMIT: ${waited} requests forwarded over the budget uncompacted (a compaction then would not have paid back); the compactions made because ${
          Object.entries(because)
            .map(([k, n]) => `${k} ${n}`)
            .join(', ') || 'none'
        }`
      )
    }
    if (mode !== 'extractive') {
      const summaryInput = [...bills.values()].reduce((n, b) => n + b.summaryInput, 0)
      const summaryRead = [...bills.values()].reduce((n, b) => n + b.summaryRead, 0)
      console.log(
        `target: ≥ 80% of the summary calls' input read from the cache: ${summaryInput ? pct(summaryRead / summaryInput) : '–'} (${summaryRead.toLocaleString('en')} of ${summaryInput.toLocaleString('en')} tokens), ${verdict(summaryInput === 0 || summaryRead / summaryInput >= 0.8)}`
      )
      const bound = budget === 45_000 ? 0.6 : 0.8
      console.log(`target: total ≤ ${pct(bound)} at ${budget.toLocaleString('en')}: ${pct(share)}, ${verdict(share <= bound)}`)
      console.log(
        `target: ≤ 1.2 summary calls per compaction: ${crossings ? (calls / crossings).toFixed(2) : '0'} (${calls}/${crossings}), ${verdict(crossings === 0 ? calls === 0 : calls / crossings <= 1.2)}`
      )
    }
  }
}
