import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { FAULT_REASONS } from '../contract/schemas.js'

/** Token counts from a few hundred to a million, dense around the budgets clients use (30K to 200K). */
export const TOKEN_BUCKETS = [
  250, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 20_000, 25_000, 30_000, 35_000, 40_000, 45_000, 50_000, 60_000, 80_000, 100_000, 120_000, 150_000, 200_000,
  300_000, 500_000, 1_000_000
]
/** Turn counts from 1 to 1,000. */
export const TURN_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000]
export const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]

/**
 * One registry per app instance (tests build many apps). Labels take values from small fixed sets only:
 * never a session id, a key, or free text.
 */
export function createMetrics() {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const registers = [registry]
  // The summary limiter is made after the metrics; it tells the gauges its load through this.
  const summaryLoad = { read: (): { active: number; waiting: number } => ({ active: 0, waiting: 0 }) }
  return {
    registry,
    summaryLoad,
    rawHistoryTokens: new Histogram({
      name: 'compaction_raw_history_tokens',
      help: 'Estimated tokens of each compacted request (messages, system, tools)',
      buckets: TOKEN_BUCKETS,
      registers
    }),
    summaryTokens: new Histogram({ name: 'compaction_summary_tokens', help: 'Estimated tokens of each summary turn', buckets: TOKEN_BUCKETS, registers }),
    compactedTurns: new Histogram({
      name: 'compaction_compacted_turns',
      help: 'Turns folded into the summary by each compaction',
      buckets: TURN_BUCKETS,
      registers
    }),
    contextAfterTokens: new Histogram({
      name: 'compaction_context_after_tokens',
      help: 'Estimated tokens of the context after each compaction (system, tools, summary turn, tail)',
      buckets: TOKEN_BUCKETS,
      registers
    }),
    requests: new Counter({
      name: 'compaction_requests_total',
      help: "Compaction requests by mode, outcome (the reason, or rejected/failed) and the history's format",
      labelNames: ['mode', 'outcome', 'format'] as const,
      registers
    }),
    summarizerCalls: new Counter({
      name: 'compaction_summarizer_calls_total',
      help: 'Summaries by summarizer kind and result (ok, or why a model summary failed)',
      labelNames: ['kind', 'result'] as const,
      registers
    }),
    summarizerDuration: new Histogram({
      name: 'compaction_summarizer_duration_seconds',
      help: 'Time to write a summary, by summarizer kind',
      labelNames: ['kind'] as const,
      buckets: SECONDS_BUCKETS,
      registers
    }),
    summarizerTokens: new Counter({
      name: 'compaction_summarizer_tokens_total',
      help: 'Model tokens used by summaries, by direction',
      labelNames: ['direction'] as const,
      registers
    }),
    recallRequests: new Counter({
      name: 'compaction_recall_requests_total',
      help: "Searches of a session's cold layer, by outcome (hits, empty, failed)",
      labelNames: ['outcome'] as const,
      registers
    }),
    recallHits: new Counter({ name: 'compaction_recall_hits_total', help: 'Entries returned by cold-layer searches', registers }),
    memoryEntries: new Counter({ name: 'compaction_memory_entries_total', help: 'Entries written to cold layers by compactions', registers }),
    summariesInFlight: new Gauge({
      name: 'compaction_summaries_in_flight',
      help: 'Model summaries running now',
      registers,
      collect() {
        this.set(summaryLoad.read().active)
      }
    }),
    summariesQueued: new Gauge({
      name: 'compaction_summaries_queued',
      help: 'Model summaries waiting for a place now',
      registers,
      collect() {
        this.set(summaryLoad.read().waiting)
      }
    }),
    cacheLookups: new Counter({
      name: 'compaction_summary_cache_total',
      help: 'Model summaries asked of the cache, by result (hit, miss)',
      labelNames: ['result'] as const,
      registers
    }),
    storeErrors: new Counter({
      name: 'compaction_store_errors_total',
      help: 'Store operations that failed (the compaction was served all the same)',
      labelNames: ['operation'] as const,
      registers
    }),
    proxyRequests: new Counter({
      name: 'compaction_proxy_requests_total',
      help: 'Proxied requests (Messages API, Chat Completions, Responses) by endpoint, what compaction did (none, reused, compacted) and status class',
      labelNames: ['endpoint', 'compaction', 'status'] as const,
      registers
    }),
    proxyUpstreamSeconds: new Histogram({
      name: 'compaction_proxy_upstream_first_byte_seconds',
      help: "Time to the first byte of the upstream API's answer to a proxied request (its status and headers), by endpoint",
      labelNames: ['endpoint'] as const,
      buckets: SECONDS_BUCKETS,
      registers
    }),
    proxyCompactions: new Counter({
      name: 'compaction_proxy_compactions_total',
      help: 'Compactions the proxy made, by source (precomputed: a summary written ahead, taken as it was; merged: the best summary at hand merged with the turns since from the ledger); a crossing never waits for a model',
      labelNames: ['source'] as const,
      registers
    }),
    proxyCrossingsWaited: new Counter({
      name: 'compaction_proxy_crossings_waited_total',
      help: 'Proxied requests over their budget forwarded uncompacted, the budget being a target under COMPACT_LIMIT: a compaction then would not have paid back its rewrite before the conversation is expected to end',
      registers
    }),
    proxyPrecomputes: new Counter({
      name: 'compaction_proxy_precomputes_total',
      help: 'Summaries written ahead for proxied conversations, by event (started; done: ready before its crossing; late: done after it, the base of the next merge; skipped: no free place; failed)',
      labelNames: ['event'] as const,
      registers
    }),
    crossingWait: new Histogram({
      name: 'compaction_crossing_wait_seconds',
      help: 'How long a proxied request that crossed its budget waited for its compaction before it was forwarded (no model call is ever waited for)',
      buckets: SECONDS_BUCKETS,
      registers
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by method, route template and status code',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: SECONDS_BUCKETS,
      registers
    })
  }
}

export type Metrics = ReturnType<typeof createMetrics>

/** The label values each labelled counter can take, so that every series exists (at 0) from the start. */
export const KNOWN_LABELS = {
  modes: ['auto', 'manual'],
  formats: ['anthropic', 'openai-chat', 'openai-responses'],
  outcomes: [
    'over_budget',
    'under_budget',
    'cache_lapsed',
    'manual',
    'disabled',
    'nothing_to_compact',
    'dry_run',
    'rejected',
    'rate_limited',
    'overloaded',
    'cancelled',
    'summarizer_failed',
    'failed'
  ],
  // a call's result: ok, or why it failed (no_api_key is no call)
  summarizerResults: ['ok', ...FAULT_REASONS.filter((r) => r !== 'no_api_key')],
  proxyEndpoints: ['messages', 'count_tokens', 'chat_completions', 'responses', 'responses_compact', 'gemini_generate', 'gemini_stream', 'gemini_count_tokens'],
  storeOperations: [
    'connection',
    'journal',
    'record_write',
    'memory_write',
    'cache_read',
    'cache_write',
    'prune',
    'recall',
    'recap',
    'record_read',
    'anchors',
    'recall_exchanges',
    'activity'
  ]
} as const

/** Outcomes a mode can have: a manual compaction is one whatever the budget; an automatic one never is "manual". */
function possible(mode: (typeof KNOWN_LABELS.modes)[number], outcome: (typeof KNOWN_LABELS.outcomes)[number]): boolean {
  return mode === 'manual' ? !['over_budget', 'under_budget', 'disabled', 'cache_lapsed'].includes(outcome) : outcome !== 'manual'
}

/** Creates every series that can happen at 0: a rate over a counter that has never moved is 0, not "no data". */
export function initializeSeries(m: Metrics, modelKind: 'anthropic' | 'openai' | 'gemini' = 'anthropic'): void {
  for (const mode of KNOWN_LABELS.modes)
    for (const outcome of KNOWN_LABELS.outcomes)
      if (possible(mode, outcome)) for (const format of KNOWN_LABELS.formats) m.requests.inc({ mode, outcome, format }, 0)
  for (const result of KNOWN_LABELS.summarizerResults) m.summarizerCalls.inc({ kind: modelKind, result }, 0)
  for (const kind of ['extractive', 'cache']) m.summarizerCalls.inc({ kind, result: 'ok' }, 0)
  for (const operation of KNOWN_LABELS.storeOperations) m.storeErrors.inc({ operation }, 0)
  for (const outcome of ['hits', 'empty', 'failed']) m.recallRequests.inc({ outcome }, 0)
  for (const result of ['hit', 'miss']) m.cacheLookups.inc({ result }, 0)
  for (const direction of ['input', 'output']) m.summarizerTokens.inc({ direction }, 0)
  for (const endpoint of KNOWN_LABELS.proxyEndpoints) {
    for (const compaction of ['none', 'reused', 'compacted'])
      for (const status of ['2xx', '4xx', '5xx']) m.proxyRequests.inc({ endpoint, compaction, status }, 0)
  }
  for (const source of ['precomputed', 'merged']) m.proxyCompactions.inc({ source }, 0)
  for (const event of ['started', 'done', 'late', 'skipped', 'failed']) m.proxyPrecomputes.inc({ event }, 0)
}
