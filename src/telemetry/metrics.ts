import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** Token counts from a few hundred to a million. */
export const TOKEN_BUCKETS = [250, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000]
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
  return {
    registry,
    rawHistoryTokens: new Histogram({ name: 'compaction_raw_history_tokens', help: 'Estimated tokens of each compacted request (messages, system, tools)', buckets: TOKEN_BUCKETS, registers }),
    summaryTokens: new Histogram({ name: 'compaction_summary_tokens', help: 'Estimated tokens of each summary turn', buckets: TOKEN_BUCKETS, registers }),
    compactedTurns: new Histogram({ name: 'compaction_compacted_turns', help: 'Turns folded into the summary by each compaction', buckets: TURN_BUCKETS, registers }),
    contextAfterTokens: new Histogram({ name: 'compaction_context_after_tokens', help: 'Estimated tokens of the context after each compaction (system, tools, summary turn, tail)', buckets: TOKEN_BUCKETS, registers }),
    requests: new Counter({ name: 'compaction_requests_total', help: 'Compaction requests by mode and outcome (the reason, or rejected/failed)', labelNames: ['mode', 'outcome'] as const, registers }),
    summarizerCalls: new Counter({ name: 'compaction_summarizer_calls_total', help: 'Summaries by summarizer kind and result (ok, or why a model summary failed)', labelNames: ['kind', 'result'] as const, registers }),
    summarizerDuration: new Histogram({ name: 'compaction_summarizer_duration_seconds', help: 'Time to write a summary, by summarizer kind', labelNames: ['kind'] as const, buckets: SECONDS_BUCKETS, registers }),
    summarizerTokens: new Counter({ name: 'compaction_summarizer_tokens_total', help: 'Model tokens used by summaries, by direction', labelNames: ['direction'] as const, registers }),
    recallRequests: new Counter({ name: 'compaction_recall_requests_total', help: 'Searches of a session\'s cold layer, by outcome (hits, empty, failed)', labelNames: ['outcome'] as const, registers }),
    recallHits: new Counter({ name: 'compaction_recall_hits_total', help: 'Entries returned by cold-layer searches', registers }),
    memoryEntries: new Counter({ name: 'compaction_memory_entries_total', help: 'Entries written to cold layers by compactions', registers }),
    storeErrors: new Counter({ name: 'compaction_store_errors_total', help: 'Store operations that failed (the compaction was served all the same)', labelNames: ['operation'] as const, registers }),
    httpDuration: new Histogram({ name: 'http_request_duration_seconds', help: 'HTTP request duration by method, route template and status code', labelNames: ['method', 'route', 'status_code'] as const, buckets: SECONDS_BUCKETS, registers })
  }
}

export type Metrics = ReturnType<typeof createMetrics>
