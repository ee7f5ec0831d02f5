import type { CompactionStats, SummarySections } from '../compaction/index.js'
import type { SummarizerReport } from '../summarizer/summarizer.js'

/** One compaction as remembered: what it was asked, what it said, and what it cost. Never the history. */
export interface CompactionRecord {
  id: string
  session_id: string | null
  /** The API key's name (never the key); '' without auth. Records are visible to this tenant only. */
  key_name: string
  created_at: string
  mode: 'auto' | 'manual'
  reason: string
  stats: CompactionStats
  summarizer: SummarizerReport
  doctrine_version: string
  summary: { text: string; sections: SummarySections }
}

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

/** Where records and the summary cache live. SQLite is the one here; another store can take its place. */
export interface Store {
  saveRecord(record: CompactionRecord): void
  /** A tenant's records of one session, newest first. Someone else's session reads as an empty one. */
  listRecords(sessionId: string, keyName: string, options: { limit: number; cursor?: string }): RecordPage
  getCached(key: string, nowMs: number): CachedSummary | undefined
  putCached(key: string, value: CachedSummary, expiresAtMs: number): void
  /** Drops records created before `beforeMs` and expired cache rows. */
  prune(beforeMs: number, nowMs: number): { records: number; cache: number }
  /** Throws when the store cannot be written. */
  checkWritable(): void
  close(): void
}

export class StoreError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreError'
  }
}
