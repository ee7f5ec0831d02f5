import { afterEach, describe, expect, it } from 'vitest'
import type { ClearedUse, Message } from '../../src/compaction/index.js'
import { GatewayError } from '../../src/contract/errors.js'
import { type CompactDeps, type CompactRun, type ResponseView, type RunContext, summarized } from '../../src/service/compact.js'
import { type BytesResult, type CompactionWorkers, Compactions, type ProxiedResult } from '../../src/service/compactions.js'
import { Activity } from '../../src/service/activity.js'
import { InvalidHistoryError } from '../../src/service/errors.js'
import { FaultWarnings, type ServedAt } from '../../src/service/served.js'
import { ReadYourWrites } from '../../src/storage/read-your-writes.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import type { Summarizer } from '../../src/summarizer/summarizer.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import { createMetrics } from '../../src/telemetry/metrics.js'
import { assistant, shellStep, user } from '../helpers/history.js'

const history: Message[] = [
  user('Fix the flaky retry test in src/net/retry.ts'),
  ...Array.from({ length: 30 }, (_, i) => shellStep(`t${i}`, `npm test -- retry ${i}`, `run ${i}\n${'o'.repeat(600)}`)).flat(),
  assistant('Done.'),
  user('Thanks')
]
let ids = 0
const deps: CompactDeps = {
  defaults: { budgetTokens: 2_000, keepTurns: 4 },
  extractive: new ExtractiveSummarizer(),
  newId: () => `cmp_services_${++ids}`,
  now: () => performance.now(),
  coldLayer: true
}
const quiet = { info: () => {}, warn: () => {}, error: () => {} } as unknown as ServedAt['log']

const opened: { close: () => Promise<void> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0)) await o.close()
})

/** Workers that record what they are handed and answer what a test gives them. */
function fakeWorkers(answers: { compact?: BytesResult; proxied?: ProxiedResult } = {}) {
  const calls: { compact: number[]; proxied: { bytes: number; context: RunContext; model: Summarizer | undefined }[]; cleared: number } = {
    compact: [],
    proxied: [],
    cleared: 0
  }
  const workers: CompactionWorkers = {
    compact: async (bytes) => {
      calls.compact.push(bytes.length)
      if (!answers.compact) throw new Error('no answer given')
      return answers.compact
    },
    proxied: async (bytes, context, model) => {
      calls.proxied.push({ bytes: bytes.length, context, model })
      if (!answers.proxied) throw new Error('no answer given')
      return answers.proxied
    },
    cleared: async () => {
      calls.cleared++
      return []
    }
  }
  return { workers, calls }
}

function service(workers?: CompactionWorkers, minBytes = { workerMinBytes: 16_384, mergeMinBytes: 262_144 }) {
  const store = new ReadYourWrites(new SqliteStore(':memory:'))
  const activity = new Activity(store, (err) => {
    throw err
  })
  opened.push(activity, store)
  const compactions = new Compactions({
    deps,
    workers,
    ...minBytes,
    serving: { store, metrics: createMetrics(), activity, modelKind: 'anthropic', faults: new FaultWarnings() }
  })
  return { compactions, store }
}

const who = () => ({ keyName: 'alpha', log: quiet, started: performance.now(), signal: new AbortController().signal })

describe('Compactions', () => {
  it("runs a compact route's input here and serves it: its answer's bytes, what it said of itself, its record kept under its session", async () => {
    const { compactions, store } = service()
    const done = await compactions.compact({ input: { messages: history, sessionId: 'sess-here', mode: 'manual' } }, who())
    const answer = JSON.parse(Buffer.from(done.json).toString()) as { compacted: boolean; summary: { id: string }; messages: unknown[] }
    expect(answer.compacted).toBe(true)
    expect(done.as).toMatchObject({ mode: 'manual', sessionId: 'sess-here' })
    if (!summarized(done.run.response)) throw new Error('not summarized')
    expect(answer.summary.id).toBe(done.run.response.summary.id)
    await done.scheduled.recorded
    done.scheduled.begin?.()
    const page = await store.listRecords('sess-here', 'alpha', { limit: 10 })
    expect(page.records.map((r) => r.id)).toEqual([answer.summary.id])
  })

  it("hands a body left as bytes to a worker, and throws a worker's refusal as the client is answered: its kind, words and place", async () => {
    const refusal: BytesResult = { ok: false, kind: 'invalid_history', message: 'body.messages[3] answers no tool_use', path: '/messages/3' }
    const { workers, calls } = fakeWorkers({ compact: refusal })
    const { compactions } = service(workers)
    expect(compactions.readsInWorker(16_383)).toBe(false)
    expect(compactions.readsInWorker(16_384)).toBe(true)
    const err = await compactions.compact({ bytes: Buffer.alloc(20_000, 32) }, who()).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(GatewayError)
    expect(err).toMatchObject({ kind: 'invalid_history', message: 'body.messages[3] answers no tool_use', path: '/messages/3' })
    expect(calls.compact).toEqual([20_000])
  })

  it('reads nothing in a worker where there are none', () => {
    expect(service().compactions.readsInWorker(10 ** 9)).toBe(false)
  })

  it("runs a proxy's large input in a worker, its messages given back as the input's own objects where the worker named them by index", async () => {
    const summaryTurn: Message = user('<compaction-summary>the summary</compaction-summary>')
    const run = { response: { compacted: true, reason: 'over_budget' }, timings: { validate: 0, plan: 0, summarize: 0 } } as unknown as CompactRun<ResponseView>
    const { workers, calls } = fakeWorkers({ proxied: { ok: true, run, messages: [summaryTurn, history.length - 2, history.length - 1] } })
    const { compactions } = service(workers, { workerMinBytes: 1_024, mergeMinBytes: 1_000_000 })
    const model = new ExtractiveSummarizer()
    const context = { keyName: 'alpha', clipToBudget: true, recallTool: false as const }
    const ran = await compactions.run({ messages: history, mode: 'manual' }, context, model)
    expect(calls.proxied).toHaveLength(1)
    expect(calls.proxied[0]?.context).toBe(context)
    expect(calls.proxied[0]?.model).toBe(model)
    if (!ran.response.compacted) throw new Error('no messages')
    expect(ran.response.messages[0]).toEqual(summaryTurn)
    expect(ran.response.messages[1]).toBe(history[history.length - 2])
    expect(ran.response.messages[2]).toBe(history[history.length - 1])
  })

  it("keeps a merge (no model) under the operator's worker size here, and throws a worker's history problem as the main thread would", async () => {
    const problem = { kind: 'history' as const, message: 'body.messages[1] is out of turn', path: '/messages/1' }
    const { workers, calls } = fakeWorkers({ proxied: { ok: false, problem } })
    const { compactions } = service(workers, { workerMinBytes: 1_024, mergeMinBytes: 1_000_000 })
    const merged = await compactions.run({ messages: history, mode: 'manual', summarizer: 'extractive' }, { keyName: 'alpha' })
    expect(calls.proxied).toHaveLength(0)
    expect(merged.response.compacted).toBe(true)
    const err = await compactions.run({ messages: history, mode: 'manual' }, { keyName: 'alpha' }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InvalidHistoryError)
    expect((err as InvalidHistoryError).problem).toEqual(problem)
  })

  it("redacts a clearing's outputs in a worker from the worker size, here below it", async () => {
    const { workers, calls } = fakeWorkers()
    const { compactions } = service(workers, { workerMinBytes: 1_000, mergeMinBytes: 1_000 })
    const use = (evidence: string): ClearedUse => ({
      message: 2,
      block: 0,
      callMessage: 1,
      tool_use_id: 'toolu_c',
      name: 'bash',
      tokens: 10,
      inputCleared: false,
      evidence
    })
    const here = await compactions.clearedMemory([use('a.ts\nb.ts')])
    expect(here.length).toBeGreaterThan(0)
    expect(calls.cleared).toBe(0)
    await compactions.clearedMemory([use('x'.repeat(1_000))])
    expect(calls.cleared).toBe(1)
  })
})
