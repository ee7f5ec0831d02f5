import { randomUUID } from 'node:crypto'
import fp from 'fastify-plugin'
import { type CompactDeps, runCompaction } from '../../service/compact.js'
import { type CompactionWorkers, Compactions } from '../../service/compactions.js'
import type { CompactTask } from '../../workers/compact.js'
import { summaryPort } from '../../workers/summary-port.js'
import { FaultWarnings, modelKindOf } from '../../service/served.js'
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

/** What compacting takes: the summarizer stack and its defaults, and the service that runs and serves every compaction. */
export interface Compaction {
  deps: CompactDeps
  /** The model summarizer's limiter (places and queue), when there is a model. */
  limited: LimitedSummarizer | undefined
  /** Workers for large compactions (COMPACT_WORKERS); where a model writes the summary, it is asked for on this thread. */
  pool: CompactionPool | undefined
  /** Every compaction, the compact route's and the proxy's: run where it runs, then served (service/compactions.ts). */
  service: Compactions
  /** The summarizer's faults, warned of once a burst wherever a summary fell back. */
  faults: FaultWarnings
}

declare module 'fastify' {
  interface FastifyInstance {
    compaction: Compaction
    /** Runs one small compaction inline and one in every worker, so that the first requests do not pay for compiling the pipeline. */
    warm: () => Promise<void>
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
    const faults = new FaultWarnings()
    const service = new Compactions({
      deps,
      workers: pool ? poolWorkers(pool, deps) : undefined,
      workerMinBytes,
      mergeMinBytes,
      serving: { store: app.store, metrics: app.metrics, activity: app.activity, modelKind: modelKindOf(deps.modelSummarizer?.kind), faults }
    })
    app.decorate('compaction', { deps, limited, pool, service, faults })
    app.addHook('onClose', async () => {
      await pool?.close()
      deps.conversations?.close()
    })
    app.decorate('warm', async () => {
      // extractive: warming never calls (or pays for) a model
      const body = { mode: 'manual' as const, summarizer: 'extractive' as const, messages: WARM_HISTORY }
      await runCompaction(body, deps, { keyName: '' })
      await pool?.warm({ defaults: deps.defaults, keyName: '', coldLayer: false, conversations: deps.conversations?.shared }, Buffer.from(JSON.stringify(body)))
    })
  },
  { name: 'compaction', dependencies: ['metrics', 'store', 'shared-state'] }
)

/** A task in a worker, its summary (where a model writes it) asked of `model` here: a fault of the model's is thrown as it was thrown. */
async function withSummaryPort<T>(run: (summary: CompactTask['summary']) => Promise<T>, model: Summarizer | undefined, signal?: AbortSignal): Promise<T> {
  const port = model ? summaryPort(model, signal) : undefined
  try {
    return await run(port && model ? { port: port.port, kind: model.kind } : undefined)
  } catch (err) {
    throw port?.errors[0] ?? err
  } finally {
    port?.close()
  }
}

/** The pool as the compactions service uses it: each task with the app's defaults, its summary asked for over a port. */
function poolWorkers(pool: CompactionPool, deps: CompactDeps): CompactionWorkers {
  const task = (keyName: string, summary: CompactTask['summary']): Omit<CompactTask, 'body'> => ({
    defaults: deps.defaults,
    keyName,
    coldLayer: deps.coldLayer === true,
    conversations: deps.conversations?.shared,
    ...(summary ? { summary } : {})
  })
  return {
    compact: (bytes, keyName, model, signal) => withSummaryPort((summary) => pool.run(task(keyName, summary), bytes), model, signal),
    proxied: (bytes, context, model) => {
      const proxied = {
        ...(context.recallTool !== undefined ? { recallTool: context.recallTool } : {}),
        ...(context.clipToBudget ? { clipToBudget: true } : {})
      }
      return withSummaryPort((summary) => pool.runProxied({ ...task(context.keyName, summary), proxied }, bytes), model, context.signal)
    },
    cleared: (uses) => pool.clearedMemory(uses)
  }
}
