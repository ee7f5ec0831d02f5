import { emptySections } from '../compaction/sections.js'
import { parseSummary } from '../compaction/summary-text.js'
import { ownerOf, unseal } from './sealing.js'
import { ANCHOR_TTL_MS } from '../contract/defaults.js'
import { type CompactionRecord, InvalidCursorError, type RecallHit } from './store.js'

/** What every store shares: how records are kept, cursors made and recall queries read. */

/** Whether COMPACT_DB names a PostgreSQL database rather than a SQLite file. */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value)
}

/** A record as kept: the sections parse back out of the summary text, so only the text is kept. */
export type StoredRecord = Omit<CompactionRecord, 'summary'> & { summary: { text: string } }

export function withSections(stored: StoredRecord): CompactionRecord {
  const sections = parseSummary(stored.summary.text)?.sections ?? emptySections()
  return { ...stored, summary: { text: stored.summary.text, sections } }
}

/** A record sealed under its session's key, opened, with its sections parsed back out of its text. */
export function openRecord(key: Buffer, body: Uint8Array): CompactionRecord {
  return withSections(JSON.parse(unseal(key, body)) as StoredRecord)
}

export function encodeCursor(seq: number): string {
  return Buffer.from(`s${seq}`).toString('base64url')
}

export function decodeCursor(cursor: string): number {
  const m = /^s(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (!m) throw new InvalidCursorError()
  return Number(m[1])
}

/** The scope of a tally: '' for the tenant's total, else the session's owner (a keyed hash: no session's id in the row). */
/**
 * How long a deleted session's tombstone is kept: longer than any work begun before the deletion runs (a
 * summary, a write ahead, an anchor's life); a write begun after it is a new session's.
 */
export const TOMBSTONE_MS = ANCHOR_TTL_MS

export function activityScope(keyName: string, sessionId: string | null): string {
  return sessionId === null ? '' : ownerOf(keyName, sessionId)
}

/** A cold-layer row as both stores read it for a recall's answer. */
export interface ColdRow {
  kind: string
  body: Uint8Array
  compaction_id: string
  msg_from: number
  msg_to: number
  created_ms: number | string
  line_from: number | null
  line_to: number | null
}

/** A recall's hit: the row opened under its session's key, with its score. */
export function recallHit(key: Buffer, r: ColdRow, score: number): RecallHit {
  return {
    kind: r.kind,
    text: unseal(key, r.body),
    compaction_id: r.compaction_id,
    messages: [r.msg_from, r.msg_to],
    ...(r.line_from !== null && r.line_to !== null ? { lines: [r.line_from, r.line_to] as [number, number] } : {}),
    score: Number(score.toFixed(4)),
    created_at: new Date(Number(r.created_ms)).toISOString()
  }
}

/**
 * Work that could not be finished, tried again every `ms` until an attempt says it is done (or `stop`):
 * a deletion's reclaiming a reader held up. `pending` while it is being retried.
 */
export class Retried {
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly ms: number,
    private readonly attempt: () => Promise<boolean>
  ) {}

  get pending(): boolean {
    return this.timer !== undefined
  }

  start(): void {
    if (this.timer) return
    this.timer = setInterval(() => {
      void this.attempt().then(
        (done) => {
          if (done) this.stop()
        },
        () => undefined
      )
    }, this.ms)
    this.timer.unref()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }
}
