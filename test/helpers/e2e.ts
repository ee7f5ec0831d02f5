/** What the end-to-end tests of real clients share: running a client to its end, and the figures they report. */
import { spawn } from 'node:child_process'
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect } from 'vitest'
import { promptTokens } from '../../src/compaction/index.js'
import { readOpenAiRequest } from '../../src/proxy/openai.js'
import type { OpenAiRequest } from './fake-openai.js'
import { type LogLine, ROOT, type ServerProcess, logLines, startServer, tempDb } from './process.js'

/**
 * A client run to its end in `cwd` with only `env` (and PATH, and the run's temporary folder, where the
 * clients leave files of their own), its output (stdout and stderr) gathered.
 */
export async function runClient(command: string, args: string[], cwd: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? '', TMPDIR: tmpdir(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr.on('data', (d: Buffer) => (out += d.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  return { code, out }
}

/** The figures every proxied run reports: its compactions and what the requests that crossed the budget waited, against the model's time. */
export function crossingFigures(proxied: LogLine[], compactions: LogLine[], modelMs: number): Record<string, unknown> {
  const crossings = proxied.filter((e) => e.compaction === 'compacted')
  return {
    compactions: compactions.length,
    sources: compactions.map((c) => c.source),
    crossing_waits_ms: crossings.map((e) => e.prepare_ms),
    worst_wait_vs_model: Math.max(0, ...crossings.map((e) => e.prepare_ms ?? 0)) / modelMs,
    context_after: compactions.map((c) => c.context_after_compaction)
  }
}

/** A run's figures, kept in test-results/e2e-NAME.json for the README and printed. */
export function writeReport(name: string, report: Record<string, unknown>): void {
  mkdirSync(join(ROOT, 'test-results'), { recursive: true })
  writeFileSync(join(ROOT, 'test-results', `e2e-${name}.json`), `${JSON.stringify(report, null, 2)}\n`)
  console.log(`e2e ${name}: ${JSON.stringify(report)}`)
}

/** How many compactions the gateway lists under a session, for the key that made them. */
export async function listedCompactions(gatewayUrl: string, session: string, key: string): Promise<number> {
  const listed = await fetch(`${gatewayUrl}/v1/sessions/${encodeURIComponent(session)}/compactions`, { headers: { 'x-api-key': key } })
  return ((await listed.json()) as { compactions: unknown[] }).compactions.length
}

/**
 * A proxied run's log, checked: every request answered 200, at least two compactions, and the bound held by
 * what each compaction forwarded and by each request forwarded as it came.
 */
export function boundedRun(gateway: ServerProcess, budget: number): { proxied: LogLine[]; compactions: LogLine[] } {
  const log = logLines(gateway)
  const proxied = log.filter((e) => e.event === 'proxied')
  const compactions = log.filter((e) => e.event === 'context_compacted')
  expect(proxied.every((e) => e.status === 200)).toBe(true)
  expect(compactions.length).toBeGreaterThanOrEqual(2)
  for (const c of compactions) expect(c.context_after_compaction).toBeLessThanOrEqual(budget)
  for (const e of proxied.filter((p) => p.compaction === 'none')) expect(e.estimated_tokens ?? 0).toBeLessThanOrEqual(budget)
  return { proxied, compactions }
}

/** How many times a value differs from the one before it (a summary message between requests, say). */
export function changes(values: readonly unknown[]): number {
  const texts = values.map((v) => JSON.stringify(v))
  return texts.filter((t, k) => k > 0 && t !== texts[k - 1]).length
}

/** A scripted run's end: the client exited 0 after the script's last answer, the upstream refused nothing, every step was handed out. */
export function expectScriptEnd(run: { code: number | null; out: string }, refused: readonly string[], handed: number, steps: number): void {
  expect(run.code, run.out).toBe(0)
  expect(run.out).toContain('SCRIPT-END reached.')
  expect(refused).toEqual([])
  expect(handed).toBe(steps)
}

/** What an OpenAI-format agent's system items and tools take, read from its first request as the gateway reads it. */
export function openAiFixedTokens(first: OpenAiRequest, format: 'chat' | 'responses'): number {
  const read = readOpenAiRequest(first.body, format, () => true)
  if (read.kind !== 'history') throw new Error(`the agent's first request did not read as a history (${read.reason})`)
  return promptTokens([], read.history.system, read.history.tools)
}

/**
 * A gateway process whose OpenAI proxies reach `upstreamUrl` with `upstreamKey`, its clients holding
 * `gatewayKey`: compaction off, or past `budget` with summaries from `summaryModel` on the same upstream.
 */
export async function openAiGateway(
  upstreamUrl: string,
  upstreamKey: string,
  gatewayKey: string,
  compaction: 'off' | { budget: number; summaryModel: string }
): Promise<ServerProcess> {
  const common = { OPENAI_API_KEY: upstreamKey, OPENAI_BASE_URL: `${upstreamUrl}/v1`, COMPACT_API_KEYS: `e2e=${gatewayKey}` }
  if (compaction === 'off') return startServer({ ...common, COMPACT_BUDGET: 'off' })
  return startServer({
    ...common,
    COMPACT_SUMMARIZER: 'openai',
    COMPACT_MODEL: compaction.summaryModel,
    COMPACT_DB: tempDb(),
    COMPACT_BUDGET: String(compaction.budget)
  })
}

/** A pace an agent may run at: how long its model takes over a turn, and the summary model over a summary (or never answers). */
export interface Pace {
  name: string
  turnMs: number
  summaryMs: number | 'never'
}

/**
 * The paces each client runs at besides its own test's (turns of 1.5 s, summaries of 8 s): turns back to
 * back with 1.5 s summaries, and a summary model that never answers.
 */
export const OTHER_PACES: Pace[] = [
  { name: 'back-to-back', turnMs: 0, summaryMs: 1_500 },
  { name: 'model-never-answers', turnMs: 0, summaryMs: 'never' }
]

/** A summary model's timing at a pace: a delay, or an answer that never comes. */
export function summaryTiming(pace: Pace): { delayMs: number } | { after: Promise<unknown> } {
  return pace.summaryMs === 'never' ? { after: new Promise(() => undefined) } : { delayMs: pace.summaryMs }
}

/**
 * A run at a pace, checked and reported: every crossing forwarded with what was at hand (a summary written
 * ahead, or a merge from the ledger); with a model that never answers, the session went on through its
 * crossings all the same. The waits are reported against the summary's time (the never-answering model's
 * against the timeout it would have been waited for, the summarizer's own).
 */
export function paceReport(name: string, pace: Pace, run: { proxied: LogLine[]; compactions: LogLine[] }, summaryCalls: number): void {
  expect(run.compactions.every((c) => c.source === 'precomputed' || c.source === 'merged')).toBe(true)
  const modelMs = pace.summaryMs === 'never' ? 60_000 : pace.summaryMs
  writeReport(`${name}-${pace.name}`, {
    pace: pace.name,
    turn_ms: pace.turnMs,
    summary_ms: pace.summaryMs,
    requests: run.proxied.length,
    summary_calls: summaryCalls,
    ...crossingFigures(run.proxied, run.compactions, modelMs)
  })
}

/** Every file a client wrote under `home` (its own record of its sessions), as one text. */
export function clientFiles(home: string): string {
  return readdirSync(home, { recursive: true, encoding: 'utf8' })
    .map((f) => join(home, f))
    .filter((f) => statSync(f).isFile())
    .map((f) => readFileSync(f, 'latin1'))
    .join('\n')
}
