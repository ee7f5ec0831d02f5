/**
 * A compaction served, wherever it ran (the compact route, inline or in a worker; a proxy's crossing; the
 * Responses API's compaction answered here): counted, logged as one event with the same fields, tallied,
 * and its record and cold layer written or scheduled, by one function (serveCompaction). The HTTP layer
 * reads body → service → reply around it.
 */
import { randomUUID } from 'node:crypto'
import type { BaseLogger } from 'pino'

/** The log a compaction's events go to (a request's). */
type Log = Pick<BaseLogger, 'info' | 'warn' | 'error'>
import type { ReadYourWrites } from '../storage/read-your-writes.js'
import type { CompactionRecord, CrossingTiming, Store } from '../storage/store.js'
import type { Metrics } from '../telemetry/metrics.js'
import type { CompactRequestBody } from '../contract/schemas.js'
import type { Activity } from './activity.js'
import { type CompactRun, type ResponseView, type Summarized, summarized } from './compact.js'

/** The answer's header that says its compaction's record could not be kept (`not-kept`): a full disk, say. */
export const RECORD_HEADER = 'x-compaction-record'

/** The model kind a fallback is counted under: the configured model summarizer's (Anthropic's where none is). */
export function modelKindOf(kind: string | undefined): 'anthropic' | 'openai' | 'gemini' {
  return kind === 'openai' || kind === 'gemini' ? kind : 'anthropic'
}

/** Counts a compaction's figures and its summarizer's work, wherever it ran (the compact route, the proxy). */
function countCompaction(metrics: Metrics, run: CompactRun<ResponseView>, modelKind: 'anthropic' | 'openai' | 'gemini' = 'anthropic'): void {
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
interface RecordWrites {
  compaction: CompactionRecord
  /** When the compaction began (ms since the epoch): a deletion of its session after that refuses both writes. */
  since: number
  record: () => Promise<void>
  coldLayer: () => Promise<void>
  /** The record could not be journaled (a full disk): counted and logged; the answer says so. */
  unjournaled: (err: unknown) => void
}

/** The writes that keep a compaction's record and cold layer. A store that fails loses them, never the compaction: each counts and logs its own failure and never rejects. */
function recordWrites(
  store: Store,
  metrics: Metrics,
  log: Log,
  body: Pick<CompactRequestBody, 'mode' | 'session_id'> & { budgetTokens: number | 'off'; crossing?: CrossingTiming },
  keyName: string,
  response: Summarized<ResponseView>,
  memory: CompactRun<ResponseView>['memory'],
  since: number
): RecordWrites {
  const created_at = new Date().toISOString()
  const compaction: CompactionRecord = {
    id: response.summary.id,
    session_id: body.session_id ?? null,
    key_name: keyName,
    created_at,
    mode: body.mode ?? 'auto',
    reason: response.reason,
    budget_tokens: body.budgetTokens === 'off' ? null : body.budgetTokens,
    stats: response.stats,
    summarizer: response.summarizer,
    doctrine_version: response.doctrine_version,
    summary: { text: response.summary.text, sections: response.summary.sections },
    ...(body.crossing ? { crossing: body.crossing } : {})
  }
  return {
    compaction,
    since,
    unjournaled: (err) => {
      metrics.storeErrors.inc({ operation: 'journal' })
      log.error({ err, summary_id: response.summary.id }, 'compaction record not journaled: answered all the same, kept only if its write succeeds')
    },
    record: async () => {
      try {
        await store.saveRecord(compaction, since)
      } catch (err) {
        metrics.storeErrors.inc({ operation: 'record_write' })
        log.error({ err, summary_id: response.summary.id }, 'compaction record not saved')
      }
    },
    coldLayer: async () => {
      if (!memory || body.session_id === undefined) return
      try {
        const saved = await store.saveMemory(
          { compaction_id: response.summary.id, session_id: body.session_id, key_name: keyName, created_at, since_ms: since },
          memory
        )
        metrics.memoryEntries.inc(memory.length)
        if (saved.evicted > 0)
          log.info({ summary_id: response.summary.id, cold_evicted: saved.evicted }, "the session's cold layer passed its bound: its oldest entries went")
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
 * backlog has room, are reserved so that reads of the session wait for them (ReadYourWrites), and are begun by the caller
 * (`begin`, once however often called) when its answer no longer needs the event loop. A store with no
 * journal (`:memory:`) writes the record before the answer.
 */
async function scheduleRecord(
  store: ReadYourWrites,
  keyName: string,
  sessionId: string | undefined,
  { compaction, since, record, coldLayer, unjournaled }: RecordWrites
): Promise<{ recorded?: Promise<void>; begin?: () => void; unkept?: true }> {
  if (store.shared) return { recorded: record().then(coldLayer) }
  await store.room?.()
  if (store.journal) {
    // A journal that cannot be written (a full disk) never fails the compaction: it is answered, flagged.
    let journaled = true
    try {
      store.journal(compaction, since)
    } catch (err) {
      journaled = false
      unjournaled(err)
    }
    return { begin: store.reserve(keyName, sessionId, () => record().then(coldLayer)), ...(journaled ? {} : { unkept: true as const }) }
  }
  return { recorded: record(), begin: store.reserve(keyName, sessionId, coldLayer) }
}

/** What serving a compaction needs, the app's own. */
export interface Serving {
  store: ReadYourWrites
  metrics: Metrics
  activity: Activity
  /** The configured model summarizer's kind (a fallback is counted under it). */
  modelKind: 'anthropic' | 'openai' | 'gemini'
  /** The summarizer's faults warned of once a burst. */
  faults: FaultWarnings
}

/** How long a burst of one fault is: its first is warned of at once, the rest counted into the next warning. */
export const FAULT_BURST_MS = 60_000

/**
 * A summarizer's faults warned of once a burst (a model answering 429 fails every summary of a minute): the
 * first of each reason at once, the next one after FAULT_BURST_MS, with how many came between.
 */
export class FaultWarnings {
  private readonly seen = new Map<string, { at: number; since: number }>()

  constructor(private readonly now: () => number = Date.now) {}

  /** Whether a fault of this reason is warned of now, and how many of it went unwarned since the last warning. */
  take(reason: string): { warn: boolean; since: number } {
    const at = this.now()
    const last = this.seen.get(reason)
    if (last && at - last.at < FAULT_BURST_MS) {
      last.since++
      return { warn: false, since: 0 }
    }
    this.seen.set(reason, { at, since: 0 })
    return { warn: true, since: last?.since ?? 0 }
  }
}

/** A summary that fell back: warned of (at warn, with its kind) once a burst, beside the metric that counts each. */
export function warnSummarizerFault(faults: FaultWarnings, log: Log, reason: string | null | undefined, fields: Record<string, unknown>): void {
  if (!reason || reason === 'no_api_key') return
  const { warn, since } = faults.take(reason)
  if (!warn) return
  log.warn(
    { event: 'summarizer_fault', reason, ...fields, ...(since > 0 ? { since_last_warning: since } : {}) },
    `model summary failed (${reason}); the extractive summary stood in${since > 0 ? ` (${since} more since the last warning)` : ''}`
  )
}

/** Where, for whom and how a compaction was asked for. */
export interface ServedAt {
  via: 'route' | 'proxy'
  keyName: string
  session: string | undefined
  mode: 'auto' | 'manual'
  budgetTokens: number | 'off'
  log: Log
  /** When the request began (performance.now()): the event's duration. */
  started: number
  /** A proxy's: its endpoint, and where the summary it forwarded came from. */
  endpoint?: string
  source?: 'precomputed' | 'merged'
  /** A proxy's crossing: how long the request waited before it was forwarded. */
  waitMs?: number
  /** A proxy's crossing under a limit: when it was made, and why then (COMPACT_LIMIT). */
  crossing?: CrossingTiming
}

/** A compaction's record writes as scheduled: `recorded` to wait for before the answer, `begin` once it has gone, `unkept` where the record could not be journaled. */
export interface Scheduled {
  recorded?: Promise<void>
  begin?: () => void
  unkept?: true
}

/**
 * A compaction served: its figures and its summarizer's work counted, one event logged (a model that failed
 * also warned of), what the gateway did tallied for the tenant and session, and its record and cold layer
 * scheduled (a clearing's cleared outputs kept in the cold layer, its session's). Never rejects for the
 * store: each write counts and logs its own failure.
 */
export async function serveCompaction(serving: Serving, run: CompactRun<ResponseView>, at: ServedAt): Promise<Scheduled> {
  const { store, metrics, activity } = serving
  const { response } = run
  countCompaction(metrics, run, serving.modelKind)
  if (at.source) metrics.proxyCompactions.inc({ source: at.source })
  // The compaction was answered, but an operator must see that the model is failing.
  warnSummarizerFault(serving.faults, at.log, response.summarizer?.fallback_reason, {
    key_name: at.keyName || undefined,
    session_id: at.session,
    summarizer_calls: response.summarizer?.calls
  })
  // One event per compaction, with its figures and never its content.
  const event = response.compacted ? 'context_compacted' : 'compaction_skipped'
  at.log.info(
    {
      event,
      via: at.via,
      ...(at.endpoint ? { endpoint: at.endpoint } : {}),
      ...(at.source ? { source: at.source } : {}),
      session_id: at.session,
      key_name: at.keyName || undefined,
      mode: at.mode,
      reason: response.reason,
      summary_id: summarized(response) ? response.summary.id : undefined,
      summarizer: response.summarizer?.kind,
      model: response.summarizer?.model ?? undefined,
      fallback_reason: response.summarizer?.fallback_reason ?? undefined,
      summarizer_calls: response.summarizer?.calls,
      duration_ms: Math.round(performance.now() - at.started),
      ...response.stats
    },
    event
  )
  if (summarized(response)) {
    activity.compaction(at.keyName, at.session, { via: at.via, response, ...(at.waitMs !== undefined ? { waitMs: at.waitMs } : {}) })
    // The record is written before the answer, or journaled; the cold layer once the answer has gone (or
    // its client has), reads of it waiting for the write. With PostgreSQL, which other replicas read, the
    // answer waits for both.
    const keep = recordWrites(
      store,
      metrics,
      at.log,
      { mode: at.mode, session_id: at.session, budgetTokens: at.budgetTokens, ...(at.crossing ? { crossing: at.crossing } : {}) },
      at.keyName,
      response,
      run.memory,
      wallClock(at.started)
    )
    return scheduleRecord(store, at.keyName, at.session, keep)
  }
  if (response.compacted) {
    // cleared, nothing summarized: no record (it has no summary); the cleared outputs go to the cold layer
    activity.clearing(at.keyName, at.session, {
      uses: response.cleared.length,
      tokens: response.cleared.reduce((n, c) => n + c.tokens, 0),
      waitMs: at.waitMs ?? performance.now() - at.started
    })
    if (run.memory && at.session !== undefined)
      await keepInColdLayer(serving, at, run.memory, "cleared tool results' outputs could not be kept in the cold layer")
  }
  return {}
}

/** The wall-clock time (ms since the epoch) of a moment of performance.now(): when a request or a piece of work began. */
export function wallClock(started: number): number {
  return Date.now() - (performance.now() - started)
}

/** Rows kept in a session's cold layer under an id of their own (not a compaction's: cleared outputs); a failure counted and logged. */
export async function keepInColdLayer(
  serving: Pick<Serving, 'store' | 'metrics'>,
  at: Pick<ServedAt, 'keyName' | 'session' | 'log'> & { started?: number },
  rows: Parameters<Store['saveMemory']>[1],
  failure: string
): Promise<void> {
  if (at.session === undefined || rows.length === 0) return
  const owner = {
    compaction_id: `clr_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
    session_id: at.session,
    key_name: at.keyName,
    created_at: new Date().toISOString(),
    // (cleared outputs of a request begun before its session's deletion are not kept after it)
    ...(at.started !== undefined ? { since_ms: wallClock(at.started) } : {})
  }
  await serving.store.saveMemory(owner, rows).then(
    (saved) => {
      serving.metrics.memoryEntries.inc(rows.length)
      if (saved.evicted > 0) at.log.info({ cold_evicted: saved.evicted }, "the session's cold layer passed its bound: its oldest entries went")
    },
    (err: unknown) => {
      serving.metrics.storeErrors.inc({ operation: 'memory_write' })
      at.log.error({ err }, failure)
    }
  )
}
