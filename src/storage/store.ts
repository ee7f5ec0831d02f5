import type { CompactionStats, SummarySections } from '../compaction/index.js'
import { GatewayError } from '../contract/errors.js'
import type { Static } from 'typebox'
import type { CompactionRecordSchema, SummarizerReportBody, TimelinePoint } from '../contract/schemas.js'
import type { Agree, Same } from '../contract/agreement.js'

/** One compaction as remembered: what it was asked, what it said, and what it cost. Never the history. */
export interface CompactionRecord {
  id: string
  session_id: string | null
  /** The API key's name (never the key); '' without auth. Records are visible to this tenant only. */
  key_name: string
  created_at: string
  mode: 'auto' | 'manual'
  reason: string
  /** The budget it was made under; null for 'off'. Absent from records made before it was kept. */
  budget_tokens?: number | null
  stats: CompactionStats
  summarizer: SummarizerReportBody
  doctrine_version: string
  summary: { text: string; sections: SummarySections }
  /** A proxied crossing's timing where the budget is a target under a limit (COMPACT_LIMIT). */
  crossing?: CrossingTiming
}

/** Why a crossing under a limit was made when it was, and how many requests it waited over the budget. */
export interface CrossingTiming {
  because: 'over_limit' | 'cache_cold' | 'pays_back' | 'reaches_limit'
  waited_requests: number
  limit_tokens: number
}

/** The record as stored agrees with the contract's (its referenced parts are checked where they are defined). */
type Referenced = 'stats' | 'summarizer' | 'summary'
export type RecordAgreesWithContract = Agree<Same<Omit<CompactionRecord, Referenced>, Omit<Static<typeof CompactionRecordSchema>, Referenced>>>

export interface RecordPage {
  records: CompactionRecord[]
  /** Pass back to get the next (older) page; null on the last page. */
  next_cursor: string | null
}

/** A model summary kept so that a retried or repeated compaction makes no second model call. */
export interface CachedSummary {
  sections: SummarySections
  model: string | null
}

/** One entry of a session's cold layer: what a compaction removed, citing the messages it came from. */
export interface MemoryRow {
  kind: string
  text: string
  from: number
  to: number
  /** Lines (1-based, inclusive) of the text this row is a passage of. */
  lines?: [number, number]
}

/** What keeping a compaction's entries did to its session's cold layer: how many of the oldest entries its bounds took out. */
export interface ColdSaved {
  evicted: number
}

/** Whose and which compaction's entries these are. */
export interface MemoryOwner {
  compaction_id: string
  session_id: string
  key_name: string
  created_at: string
  /** When the work that made them began (ms since the epoch; created_at where not given): a deletion of the session after it refuses them. */
  since_ms?: number
}

export interface RecallQuery {
  text: string
  limit: number
  kinds?: readonly string[]
}

export interface RecallHit {
  kind: string
  text: string
  compaction_id: string
  messages: [number, number]
  /** Lines (1-based, inclusive) of the text the entry is a passage of, where it is one. */
  lines?: [number, number]
  /** Higher is better: BM25 over the session's own entries. */
  score: number
  created_at: string
}

/** A page of one compaction's cold-layer entries; `last` is where the next page starts (null on the last). */
export interface EntryPage {
  entries: { kind: string; text: string; messages: [number, number] }[]
  last: number | null
}

/** One of a tenant's sessions as a list shows it: its compactions, and its newest one's figures. */
export interface SessionSummary {
  session_id: string
  compactions: number
  first_at: string
  last_at: string
  last_compaction_id: string
  /** The newest compaction's prompt size before and after. */
  raw_history_tokens: number
  context_after_compaction: number
}

export interface SessionPage {
  sessions: SessionSummary[]
  next_cursor: string | null
}

/** A list's row as both stores read it: the session's row (its id opened) and its newest record's columns. */
export interface SessionRow {
  session_id: string
  n: number
  first_ms: number
  /** The newest record's id, time and figures. */
  id: string
  created_ms: number
  raw: number
  after: number
}

/** A session as the list shows it. */
export function sessionSummary(row: SessionRow): SessionSummary {
  return {
    session_id: row.session_id,
    compactions: row.n,
    first_at: new Date(row.first_ms).toISOString(),
    last_at: new Date(row.created_ms).toISOString(),
    last_compaction_id: row.id,
    raw_history_tokens: row.raw,
    context_after_compaction: row.after
  }
}

/** Whose session a cached summary or a conversation's anchors were made for. */
export interface SessionOwner {
  key_name: string
  session_id: string
  /** When the work that made it began (ms since the epoch; the write's own time where not given): a deletion of the session after it refuses it. */
  since_ms?: number
}

/** What deleting a session deleted. */
export interface DeletedSession {
  compactions: number
  cold_layer: number
  /** Cached summaries and proxy anchors. */
  cached: number
  /** The keys of the cached rows deleted (whose locks in Redis go too). */
  cache_keys: string[]
  /**
   * Whether the space they took was given back: SQLite's freed pages zeroed and its WAL emptied (the file
   * shrinks where it was made with incremental vacuum, as files this version creates are); PostgreSQL's
   * tables rewritten (VACUUM FULL). False where that step failed after the rows were deleted.
   */
  space_reclaimed: boolean
  /** Why not, for the log. */
  reclaim_failure?: string
}

/** One compaction as its own page shows it: its record, and what its cold layer keeps, by kind. */
export interface CompactionDetail {
  record: CompactionRecord
  /** Cold-layer entries of this compaction, by kind (none where the session kept no cold layer). */
  memory: Record<string, number>
}

/** A session's current summary: its newest record, and how many compactions it has had. */
export interface Recap {
  record: CompactionRecord
  compactions: number
}

/** Where records, the summary cache and the cold layer live: SQLite (the embedded default) or PostgreSQL. */
/**
 * A tally of what the gateway did for a tenant in one hour: added to (or, for a name that begins with
 * `max:`, raised to) its value. `session_id` null is the tenant's total over all its conversations.
 */
export interface ActivityTally {
  key_name: string
  session_id: string | null
  /** The hour's start (ms since the epoch, a multiple of 3,600,000). */
  hour_ms: number
  name: string
  value: number
}

/** One hour's tally of a name, as read back. */
export interface ActivityRow {
  hour_ms: number
  name: string
  value: number
}

export interface Store {
  /** Read by other processes too (replicas sharing PostgreSQL): a write must be done before the answer that tells of it. */
  readonly shared?: boolean
  /**
   * Keeps a compaction's record, unless its session (or, without one, the compaction) was deleted at or after
   * `since` (when the compaction began; its created_at where not given): a deletion is final (a tombstone).
   */
  saveRecord(record: CompactionRecord, since?: number): Promise<void>
  /** A tenant's records of one session, newest first. Someone else's session reads as an empty one. */
  listRecords(sessionId: string, keyName: string, options: { limit: number; cursor?: string }): Promise<RecordPage>
  /** A tenant's sessions (those with a session id), the one with the newest compaction first. */
  listSessions(keyName: string, options: { limit: number; cursor?: string }): Promise<SessionPage>
  getCached(key: string, nowMs: number): Promise<CachedSummary | undefined>
  /** `owner`: the session the summary was made for, so that deleting the session deletes it too. */
  putCached(key: string, value: CachedSummary, expiresAtMs: number, owner?: SessionOwner): Promise<void>
  /** A piece of the service's own state (a proxied conversation's anchors), kept beside the cache until it expires. */
  getState(key: string, nowMs: number): Promise<unknown>
  putState(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): Promise<void>
  /** The service's value kept for good under `key`: the one there, else `value` (where replicas race, the first written is every one's). */
  firstState(key: string, value: unknown): Promise<unknown>
  /** Adds tallies of what the gateway did (Activity), in one transaction. */
  addActivity(tallies: readonly ActivityTally[]): Promise<void>
  /** A tenant's tallies from `fromMs` (inclusive) to `toMs` (exclusive) by hour: its total, or one session's. */
  activity(keyName: string, sessionId: string | null, range: { fromMs: number; toMs: number }): Promise<ActivityRow[]>
  /** Keeps a compaction's cold-layer entries (already redacted), within the per-session cap. */
  saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<ColdSaved>
  /** A tenant's entries of one session that match the query, best first. Someone else's session finds nothing. */
  recall(sessionId: string, keyName: string, query: RecallQuery): Promise<RecallHit[]>
  /**
   * One compaction's cold-layer entries, in the order it wrote them (the removed messages' order), after
   * the entry `after` (0 for the first page): what the compaction removed, as its page shows it.
   */
  entries(sessionId: string, keyName: string, compactionId: string, options: { after: number; limit: number }): Promise<EntryPage>
  /** One compaction of a tenant's session, or undefined where there is none (or it is someone else's). */
  compaction(sessionId: string, keyName: string, compactionId: string): Promise<CompactionDetail | undefined>
  /** A tenant's session's compactions as points of a chart, oldest first: the newest `limit` of them. */
  timeline(sessionId: string, keyName: string, limit: number): Promise<TimelinePoint[]>
  /** The session's current summary, or undefined for a session the tenant has no record of. */
  recap(sessionId: string, keyName: string): Promise<Recap | undefined>
  /**
   * Deletes all a tenant's session left here (its records, cold layer, cached summaries and anchors), with
   * the bytes they took overwritten or rewritten, not only unlinked. Another tenant's session, or none,
   * deletes nothing: deleting is idempotent.
   */
  deleteSession(sessionId: string, keyName: string): Promise<DeletedSession>
  /** Deletes a compaction made without a session (its record and its key), by its id; whether there was one of the tenant's. */
  deleteCompaction(compactionId: string, keyName: string): Promise<boolean>
  /** Drops records, cold-layer entries and tallies of hours before `beforeMs`, and expired cache rows. */
  prune(beforeMs: number, nowMs: number): Promise<{ records: number; cache: number; memory: number }>
  /** Throws when the store cannot be written. */
  checkWritable(): Promise<void>
  /**
   * Resolves when the store can take more writes without its backlog growing (SQLite's writer thread); a
   * caller that writes after answering waits for it first, so that answers slow to the writes' pace.
   */
  room?(): Promise<void>
  /**
   * Makes a record durable at once, before its write is done (SQLite: a line appended to a journal beside
   * the file, replayed at the next start), so that an answer need not wait for the write itself.
   * Absent where records are written before the answer anyway, or kept nowhere (`:memory:`).
   */
  journal?(record: CompactionRecord, since?: number): void
  close(): Promise<void>
}

/** A cursor this server did not give: the client's mistake, a 400 at `/cursor`. */
export class InvalidCursorError extends GatewayError {
  constructor() {
    super('invalid_request', 'querystring.cursor is not a cursor this server gave', { path: '/cursor' })
  }
}

/** The store failed (the HTTP error handler answers 503 with Retry-After, and logs why). */
export class StoreError extends Error {
  /** What could not be done, in the client's answer: the store could not be `read`, or `written`. */
  readonly failed: 'read' | 'written' | undefined

  constructor(message: string, options?: { cause?: unknown; failed?: 'read' | 'written' }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'StoreError'
    this.failed = options?.failed
  }
}
