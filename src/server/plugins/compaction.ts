import { randomUUID } from 'node:crypto'
import fp from 'fastify-plugin'
import {
  type CompactDeps,
  type CompactResponseBody,
  type CompactRun,
  type CompactRunView,
  type RunContext,
  clearedMemory,
  runCompaction
} from '../../service/compact.js'
import type { MemoryEntry } from '../../memory/entries.js'
import type { CompactRequestBody } from '../../contract/schemas.js'
import { jsonBytes } from '../../contract/wire.js'
import { type ClearedUse, at } from '../../compaction/index.js'
import { InvalidHistoryError } from '../../service/errors.js'
import type { CompactTask, CompactTaskResult, ProxiedResult } from '../../workers/compact.js'
import { summaryPort } from '../../workers/summary-port.js'
import { FaultWarnings, type Scheduled, type ServedAt, modelKindOf, serveCompaction } from '../../service/served.js'
import { ConversationsText } from '../../service/conversations.js'
import { redisFlight } from '../../storage/redis.js'
import { CachingSummarizer } from '../../summarizer/cache.js'
import { ExtractiveSummarizer } from '../../summarizer/extractive.js'
import { modelSummarizer } from '../../summarizer/index.js'
import { LimitedSummarizer } from '../../summarizer/limit.js'
import type { Summarizer } from '../../summarizer/summarizer.js'
import { CompactionPool } from '../../workers/pool.js'
import type { Config } from '../config.js'
import { MODEL_WORKER_MIN_KB, OVERLOADED_RETRY_AFTER_S } from '../../contract/defaults.js'

/** What compacting takes: the summarizer stack, the defaults and the workers. */
export interface Compaction {
  deps: CompactDeps
  /** The model summarizer's limiter (places and queue), when there is a model. */
  limited: LimitedSummarizer | undefined
  /** Bodies of this many bytes or more go to the workers, where there are (COMPACT_WORKER_MIN_KB; with a model, MODEL_WORKER_MIN_KB where lower). */
  workerMinBytes: number
  /** Workers for large compactions (COMPACT_WORKERS); where a model writes the summary, it is asked for on this thread. */
  pool: CompactionPool | undefined
  /** A /v1/compact body of `workerMinBytes` or more, as its bytes, compacted in a worker (its summary, where a model writes it, asked for here under `signal`). */
  runRaw: (bytes: Buffer, keyName: string, signal: AbortSignal) => Promise<CompactTaskResult>
  /**
   * A proxy's compaction (a crossing's, one asked for, a summary written ahead) where the route's run: a body
   * of `workerMinBytes` or more in a worker where there are workers, else here; the same run either way. A
   * summary is the gateway's model's, or `model`'s (the client's own) where given.
   */
  runProxied: (body: CompactRequestBody, context: RunContext, model?: Summarizer) => Promise<CompactRun>
  /** The summarizer's faults, warned of once a burst wherever a summary fell back. */
  faults: FaultWarnings
  /** The cold layer's entries of tool results the proxy cleared, their whole outputs redacted: in a worker where they are as large as a body sent to one. */
  clearedMemory: (uses: ClearedUse[]) => Promise<MemoryEntry[]>
}

declare module 'fastify' {
  interface FastifyInstance {
    compaction: Compaction
    /** Runs one small compaction inline and one in every worker, so that the first requests do not pay for compiling the pipeline. */
    warm: () => Promise<void>
    /** A compaction served, wherever it ran: counted, logged, tallied, its record written or scheduled (service/served.ts). */
    serve: (run: CompactRunView, at: ServedAt) => Promise<Scheduled>
  }
}

/** A small history that runs every stage of the pipeline, for warming it at boot. */
const WARM_HISTORY = [
  { role: 'user' as const, content: 'Fix the failing test in tests/test_a.py; password=warm-up-only-1' },
  { role: 'assistant' as const, content: [{ type: 'tool_use', id: 'w1', name: 'bash', input: { command: "sed -i 's/a/b/' src/a.py && pytest -x" } }] },
  {
    role: 'user' as const,
    content: [
      { type: 'tool_result', tool_use_id: 'w1', content: 'FAILED tests/test_a.py::test_x - AssertionError\n<returncode>1</returncode>', is_error: true }
    ]
  },
  { role: 'assistant' as const, content: 'Fixed it.' },
  { role: 'user' as const, content: 'thanks' }
]

/** A proxied compaction's run as the main thread would have made it: each message the worker gave back by its index is the body's own object (the one whose bytes the client sent). */
function withMessagesBack(result: Extract<ProxiedResult, { ok: true }>, sent: readonly unknown[]): CompactRun {
  const { run, messages } = result
  if (!messages) return run as CompactRun
  return { ...run, response: { ...run.response, messages: messages.map((m) => (typeof m === 'number' ? at(sent, m) : m)) } as CompactResponseBody }
}

export interface CompactionPluginOptions {
  config: Config
  /** A model summarizer to use instead of Anthropic's (it still runs behind the timeout and fallback). */
  summarizer?: Summarizer
  newId?: () => string
  now: () => number
}

/**
 * The summarizer stack (the model behind its timeout and fallback, the limiter, the shared cache with
 * its cross-replica singleflight), the extractive summarizer, the defaults, and the worker pool.
 */
export const compactionPlugin = fp<CompactionPluginOptions>(
  async (app, { config, summarizer, newId, now }) => {
    const { metrics, store, redis } = app
    const resilient = await modelSummarizer(config, summarizer)
    const limited = resilient
      ? new LimitedSummarizer(resilient, {
          concurrency: config.COMPACT_MAX_SUMMARIES,
          queue: config.COMPACT_SUMMARY_QUEUE,
          // A summary waits for a place no longer than one summary may take.
          maxWaitMs: config.COMPACT_SUMMARIZER_TIMEOUT_MS,
          retryAfterS: OVERLOADED_RETRY_AFTER_S
        })
      : undefined
    if (limited) metrics.summaryLoad.read = () => limited.load
    const model = limited
      ? new CachingSummarizer(limited, {
          store,
          ttlMs: config.COMPACT_CACHE_TTL_S * 1_000,
          model: config.COMPACT_MODEL,
          now,
          ...(redis ? { flight: redisFlight(redis, randomUUID()), flightTtlMs: 2 * config.COMPACT_SUMMARIZER_TIMEOUT_MS + 5_000 } : {}),
          onStoreError: (operation, err) => {
            metrics.storeErrors.inc({ operation })
            app.log.error({ err, operation }, 'summary cache failed; served without it')
          }
        })
      : undefined
    // Workers take large compactions off the event loop: the parse, the plan, the redaction, the answer's bytes;
    // a model's summary is asked for on this thread (its limiter, cache and fallback are the app's).
    const pool = config.COMPACT_WORKERS > 0 ? new CompactionPool(config.COMPACT_WORKERS) : undefined
    const deps: CompactDeps = {
      defaults: {
        budgetTokens: config.COMPACT_BUDGET,
        keepTokens: config.COMPACT_KEEP_TOKENS,
        keepTurns: config.COMPACT_KEEP_TURNS,
        ...(config.COMPACT_SUMMARIZER === 'extractive' ? { extractiveChosen: true } : {})
      },
      ...(model ? { modelSummarizer: model } : {}),
      extractive: new ExtractiveSummarizer(),
      newId: newId ?? (() => `cmp_${randomUUID().replace(/-/g, '')}`),
      now: () => performance.now(),
      coldLayer: true,
      conversations: new ConversationsText(undefined, undefined, `compaction-gateway:conversations:${randomUUID()}`)
    }
    const workerMinBytes = (model ? Math.min(config.COMPACT_WORKER_MIN_KB, MODEL_WORKER_MIN_KB) : config.COMPACT_WORKER_MIN_KB) * 1024
    // a compaction no model writes (a crossing's merge from the ledger) goes to a worker from the operator's size
    // alone: the client waits for it, and the hop is most of its time below that size
    const mergeMinBytes = config.COMPACT_WORKER_MIN_KB * 1024
    /** A task in a worker, its summary (where a model writes it) asked of `model` here: a fault of the model's is thrown as it was thrown. */
    const inWorker = async <T>(run: (summary: CompactTask['summary']) => Promise<T>, summarizer: Summarizer | undefined, signal?: AbortSignal): Promise<T> => {
      const port = summarizer ? summaryPort(summarizer, signal) : undefined
      try {
        return await run(port && summarizer ? { port: port.port, kind: summarizer.kind } : undefined)
      } catch (err) {
        throw port?.errors[0] ?? err
      } finally {
        port?.close()
      }
    }
    const task = (keyName: string): Omit<CompactTask, 'body'> => ({
      defaults: deps.defaults,
      keyName,
      coldLayer: deps.coldLayer === true,
      conversations: deps.conversations?.shared
    })
    const runRaw = (bytes: Buffer, keyName: string, signal: AbortSignal): Promise<CompactTaskResult> => {
      if (!pool) throw new Error('no workers to compact in')
      return inWorker((summary) => pool.run({ ...task(keyName), ...(summary ? { summary } : {}) }, bytes), deps.modelSummarizer, signal)
    }
    const runProxied = async (body: CompactRequestBody, context: RunContext, model?: Summarizer): Promise<CompactRun> => {
      // the conversation's own model where the proxy gives one (COMPACT_PROXY_SUMMARIES), else the gateway's
      const summarizer = model ?? deps.modelSummarizer
      const here = model ? { ...deps, modelSummarizer: model } : deps
      if (!pool) return runCompaction(body, here, context)
      // the body as bytes: the client's messages as the bytes they came as, the rest written once
      const bytes = jsonBytes(body)
      if (bytes.length < (body.summarizer === 'extractive' ? mergeMinBytes : workerMinBytes)) return runCompaction(body, here, context)
      const proxied = {
        ...(context.recallTool !== undefined ? { recallTool: context.recallTool } : {}),
        ...(context.clipToBudget ? { clipToBudget: true } : {})
      }
      const result = await inWorker(
        (summary) => pool.runProxied({ ...task(context.keyName), proxied, ...(summary ? { summary } : {}) }, bytes),
        summarizer,
        context.signal
      )
      if (!result.ok) throw new InvalidHistoryError(result.problem)
      return withMessagesBack(result, body.messages)
    }
    const keepCleared = async (uses: ClearedUse[]): Promise<MemoryEntry[]> => {
      const bytes = uses.reduce((n, u) => n + u.evidence.length, 0)
      return pool && bytes >= workerMinBytes ? pool.clearedMemory(uses) : clearedMemory(uses)
    }
    const faults = new FaultWarnings()
    app.decorate('compaction', { deps, limited, pool, workerMinBytes, runRaw, runProxied, faults, clearedMemory: keepCleared })
    app.addHook('onClose', async () => {
      await pool?.close()
      deps.conversations?.close()
    })
    const serving = { store: app.store, metrics: app.metrics, activity: app.activity, modelKind: modelKindOf(deps.modelSummarizer?.kind), faults }
    app.decorate('serve', (run: CompactRunView, at: ServedAt) => serveCompaction(serving, run, at))
    app.decorate('warm', async () => {
      // extractive: warming never calls (or pays for) a model
      const body = { mode: 'manual' as const, summarizer: 'extractive' as const, messages: WARM_HISTORY }
      await runCompaction(body, deps, { keyName: '' })
      await pool?.warm({ defaults: deps.defaults, keyName: '', coldLayer: false, conversations: deps.conversations?.shared }, Buffer.from(JSON.stringify(body)))
    })
  },
  { name: 'compaction', dependencies: ['metrics', 'store', 'shared-state'] }
)
