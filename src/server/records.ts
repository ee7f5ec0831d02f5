import type { FastifyBaseLogger } from 'fastify'
import type { CompactRunView, SummarizedView } from '../service/compact.js'
import type { CompactionRecord, Store } from '../storage/store.js'
import type { Metrics } from '../telemetry/metrics.js'
import type { CompactRequestBody } from '../contract/schemas.js'
import type { WritesAfterAnswers } from './writes.js'

/** The answer's header that says its compaction's record could not be kept (`not-kept`): a full disk, say. */
export const RECORD_HEADER = 'x-compaction-record'

/** The model kind a fallback is counted under: the configured model summarizer's (Anthropic's where none is). */
export function modelKindOf(kind: string | undefined): 'anthropic' | 'openai' | 'gemini' {
  return kind === 'openai' || kind === 'gemini' ? kind : 'anthropic'
}

/** Counts a compaction's figures and its summarizer's work, wherever it ran (the compact route, the proxy). */
export function countCompaction(metrics: Metrics, run: CompactRunView, modelKind: 'anthropic' | 'openai' | 'gemini' = 'anthropic'): void {
  const { response } = run
  const s = response.stats
  if (response.compacted) {
    metrics.rawHistoryTokens.observe(s.raw_history_tokens)
    metrics.summaryTokens.observe(s.summary_tokens)
    metrics.compactedTurns.observe(s.compacted_turns)
    metrics.contextAfterTokens.observe(s.context_after_compaction)
  }
  const r = response.summarizer
  if (!r) return
  const reason = r.fallback_reason
  // A model that failed is counted as such; the extractive summary that stood in is counted too.
  if (reason && reason !== 'no_api_key') metrics.summarizerCalls.inc({ kind: modelKind, result: reason })
  metrics.summarizerCalls.inc({ kind: r.kind, result: 'ok' })
  if (r.kind === 'cache') metrics.cacheLookups.inc({ result: 'hit' })
  else if (r.kind === modelKind || (reason && reason !== 'no_api_key')) metrics.cacheLookups.inc({ result: 'miss' })
  metrics.summarizerDuration.observe({ kind: r.kind }, r.duration_ms / 1_000)
  if (r.input_tokens) metrics.summarizerTokens.inc({ direction: 'input' }, r.input_tokens)
  if (r.output_tokens) metrics.summarizerTokens.inc({ direction: 'output' }, r.output_tokens)
}

/** A compaction's record, and its two writes: the record, and its cold layer (what it removed, indexed for recall). */
export interface RecordWrites {
  compaction: CompactionRecord
  record: () => Promise<void>
  coldLayer: () => Promise<void>
  /** The record could not be journaled (a full disk): counted and logged; the answer says so. */
  unjournaled: (err: unknown) => void
}

/** The writes that keep a compaction's record and cold layer. A store that fails loses them, never the compaction: each counts and logs its own failure and never rejects. */
export function recordWrites(
  store: Store,
  metrics: Metrics,
  log: FastifyBaseLogger,
  body: Pick<CompactRequestBody, 'mode' | 'session_id'> & { budget: number | 'off' },
  keyName: string,
  response: SummarizedView,
  memory: CompactRunView['memory']
): RecordWrites {
  const created_at = new Date().toISOString()
  const compaction: CompactionRecord = {
    id: response.summary.id,
    session_id: body.session_id ?? null,
    key_name: keyName,
    created_at,
    mode: body.mode ?? 'auto',
    reason: response.reason,
    budget_tokens: body.budget === 'off' ? null : body.budget,
    stats: response.stats,
    summarizer: response.summarizer,
    doctrine_version: response.doctrine_version,
    summary: { text: response.summary.text, sections: response.summary.sections }
  }
  return {
    compaction,
    unjournaled: (err) => {
      metrics.storeErrors.inc({ operation: 'journal' })
      log.error({ err, summary_id: response.summary.id }, 'compaction record not journaled: answered all the same, kept only if its write succeeds')
    },
    record: async () => {
      try {
        await store.saveRecord(compaction)
      } catch (err) {
        metrics.storeErrors.inc({ operation: 'record_write' })
        log.error({ err, summary_id: response.summary.id }, 'compaction record not saved')
      }
    },
    coldLayer: async () => {
      if (!memory || body.session_id === undefined) return
      try {
        await store.saveMemory({ compaction_id: response.summary.id, session_id: body.session_id, key_name: keyName, created_at }, memory)
        metrics.memoryEntries.inc(memory.length)
      } catch (err) {
        metrics.storeErrors.inc({ operation: 'memory_write' })
        log.error({ err, summary_id: response.summary.id }, 'cold layer not saved')
      }
    }
  }
}

/**
 * When a compaction's record and cold layer are written, for every route that keeps them. A compaction
 * answered must be recorded even if the process is killed the next moment. With a store other replicas
 * read, both are written before the answer (`recorded`: the caller's answer waits for it). With SQLite the
 * record is journaled at once (a line appended beside the file, replayed at the next start: far cheaper than
 * waiting for the write under load, docs/performance.md), and both writes wait until the store's
 * backlog has room, are reserved so that reads of the session wait for them, and are begun by the caller
 * (`begin`, once however often called) when its answer no longer needs the event loop. A store with no
 * journal (`:memory:`) writes the record before the answer.
 */
export async function scheduleRecord(
  store: Store,
  writes: WritesAfterAnswers,
  keyName: string,
  sessionId: string | undefined,
  { compaction, record, coldLayer, unjournaled }: RecordWrites
): Promise<{ recorded?: Promise<void>; begin?: () => void; unkept?: true }> {
  if (store.shared) return { recorded: record().then(coldLayer) }
  await store.room?.()
  if (store.journal) {
    // A journal that cannot be written (a full disk) never fails the compaction: it is answered, flagged.
    let journaled = true
    try {
      store.journal(compaction)
    } catch (err) {
      journaled = false
      unjournaled(err)
    }
    return { begin: writes.reserve(keyName, sessionId, () => record().then(coldLayer)), ...(journaled ? {} : { unkept: true as const }) }
  }
  return { recorded: record(), begin: writes.reserve(keyName, sessionId, coldLayer) }
}
