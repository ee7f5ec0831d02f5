import {
  type ActivityRow,
  type ActivityTally,
  type CachedSummary,
  type ColdSaved,
  type CompactionDetail,
  type CompactionRecord,
  type DeletedSession,
  type EntryPage,
  InvalidCursorError,
  type MemoryOwner,
  type MemoryRow,
  type Recap,
  type RecallHit,
  type RecallQuery,
  type RecordPage,
  type SessionOwner,
  type SessionPage,
  type Store,
  StoreError
} from './store.js'
import type { TimelinePoint } from '../contract/schemas.js'

/**
 * Store writes begun once an answer has gone (a compaction's record and cold layer, whose indexing takes
 * longer than the compaction the client waits for: docs/performance.md), and the
 * reads that must see them: a read of a session in this process waits until every write of that session
 * reserved before it has settled, so that a client asking for its records right after its answer finds
 * them. Writes are kept apart by session so that a client slow to read its answer delays no one else.
 */
export class WritesAfterAnswers {
  private readonly pending = new Map<string, Set<Promise<void>>>()
  private readonly waiting = new Set<() => void>()

  /**
   * Reserves a write of a tenant's session (none: no read asks for it) and returns what begins it, once
   * however often it is called. `write` must not throw: the record's writer counts and logs its own failures.
   */
  reserve(keyName: string, sessionId: string | undefined, write: () => Promise<void>): () => void {
    const key = sessionKey(keyName, sessionId)
    let begin!: () => void
    const started = new Promise<void>((resolve) => (begin = resolve))
    const done: Promise<void> = started
      .then(write)
      .catch(() => undefined)
      .finally(() => {
        const set = this.pending.get(key)
        set?.delete(done)
        if (set?.size === 0) this.pending.delete(key)
      })
    const set = this.pending.get(key) ?? new Set()
    set.add(done)
    this.pending.set(key, set)
    this.waiting.add(begin)
    return () => {
      if (this.waiting.delete(begin)) begin()
    }
  }

  /** Settles when every write of the session reserved so far has. */
  async settled(keyName: string, sessionId: string): Promise<void> {
    const set = this.pending.get(sessionKey(keyName, sessionId))
    if (set) await Promise.all([...set])
  }

  /** Settles when every write of the tenant's sessions reserved so far has (a list of its sessions). */
  async settledTenant(keyName: string): Promise<void> {
    const prefix = `${keyName}\u0000`
    await Promise.all([...this.pending].filter(([key]) => key.startsWith(prefix)).flatMap(([, set]) => [...set]))
  }

  /** Begins every write still waiting for its answer and settles when all have (before the store closes). */
  async drain(): Promise<void> {
    for (const begin of [...this.waiting]) begin()
    this.waiting.clear()
    await Promise.all([...this.pending.values()].flatMap((set) => [...set]))
  }
}

function sessionKey(keyName: string, sessionId: string | undefined): string {
  return sessionId === undefined ? '' : `${keyName}\u0000${sessionId}`
}

/**
 * A store as the service uses it: a client reads its own writes (a read of a session waits for the writes
 * of that session reserved before it, begun once their answers have gone; a read of a tenant's sessions for
 * all of the tenant's), and a failed read or deletion is a StoreError that says what could not be done (the
 * HTTP layer answers 503), whatever the store's own error was. A cursor the client made up stays its own
 * error (400). The summary cache's and anchors' reads and every write are passed on as they are: their
 * callers count and log their own failures.
 */
export class ReadYourWrites implements Store {
  private readonly writes = new WritesAfterAnswers()
  readonly shared: boolean | undefined
  readonly room?: () => Promise<void>
  readonly journal?: (record: CompactionRecord, since?: number) => void

  constructor(readonly inner: Store) {
    this.shared = inner.shared
    if (inner.room) this.room = () => (inner.room as () => Promise<void>).call(inner)
    if (inner.journal) this.journal = (record, since) => (inner.journal as (r: CompactionRecord, since?: number) => void).call(inner, record, since)
  }

  /** Reserves a write of a tenant's session, begun by what this returns (WritesAfterAnswers.reserve). */
  reserve(keyName: string, sessionId: string | undefined, write: () => Promise<void>): () => void {
    return this.writes.reserve(keyName, sessionId, write)
  }

  saveRecord(record: CompactionRecord, since?: number): Promise<void> {
    return this.inner.saveRecord(record, since)
  }
  listRecords(sessionId: string, keyName: string, options: { limit: number; cursor?: string }): Promise<RecordPage> {
    return this.read(keyName, sessionId, () => this.inner.listRecords(sessionId, keyName, options))
  }
  listSessions(keyName: string, options: { limit: number; cursor?: string }): Promise<SessionPage> {
    return this.read(keyName, null, () => this.inner.listSessions(keyName, options))
  }
  getCached(key: string, nowMs: number): Promise<CachedSummary | undefined> {
    return this.inner.getCached(key, nowMs)
  }
  putCached(key: string, value: CachedSummary, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    return this.inner.putCached(key, value, expiresAtMs, owner)
  }
  getState(key: string, nowMs: number): Promise<unknown> {
    return this.inner.getState(key, nowMs)
  }
  putState(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    return this.inner.putState(key, value, expiresAtMs, owner)
  }
  firstState(key: string, value: unknown): Promise<unknown> {
    return this.inner.firstState(key, value)
  }
  addActivity(tallies: readonly ActivityTally[]): Promise<void> {
    return this.inner.addActivity(tallies)
  }
  activity(keyName: string, sessionId: string | null, range: { fromMs: number; toMs: number }): Promise<ActivityRow[]> {
    return this.read(keyName, sessionId, () => this.inner.activity(keyName, sessionId, range))
  }
  saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<ColdSaved> {
    return this.inner.saveMemory(owner, rows)
  }
  recall(sessionId: string, keyName: string, query: RecallQuery): Promise<RecallHit[]> {
    return this.read(keyName, sessionId, () => this.inner.recall(sessionId, keyName, query))
  }
  entries(sessionId: string, keyName: string, compactionId: string, options: { after: number; limit: number }): Promise<EntryPage> {
    return this.read(keyName, sessionId, () => this.inner.entries(sessionId, keyName, compactionId, options))
  }
  compaction(sessionId: string, keyName: string, compactionId: string): Promise<CompactionDetail | undefined> {
    return this.read(keyName, sessionId, () => this.inner.compaction(sessionId, keyName, compactionId))
  }
  timeline(sessionId: string, keyName: string, limit: number): Promise<TimelinePoint[]> {
    return this.read(keyName, sessionId, () => this.inner.timeline(sessionId, keyName, limit))
  }
  recap(sessionId: string, keyName: string): Promise<Recap | undefined> {
    return this.read(keyName, sessionId, () => this.inner.recap(sessionId, keyName))
  }
  /** Deletes a session once the writes reserved for it have landed, so that none lands after. */
  deleteCompaction(compactionId: string, keyName: string): Promise<boolean> {
    return this.inner.deleteCompaction(compactionId, keyName)
  }

  deleteSession(sessionId: string, keyName: string): Promise<DeletedSession> {
    return this.read(keyName, sessionId, () => this.inner.deleteSession(sessionId, keyName), 'written')
  }
  prune(beforeMs: number, nowMs: number): Promise<{ records: number; cache: number; memory: number }> {
    return this.inner.prune(beforeMs, nowMs)
  }
  checkWritable(): Promise<void> {
    return this.inner.checkWritable()
  }

  /** Begins every write still waiting for its answer and settles when all have. */
  drain(): Promise<void> {
    return this.writes.drain()
  }

  /** Begins every write still waiting for its answer, waits for all, then closes the store. */
  async close(): Promise<void> {
    await this.writes.drain()
    await this.inner.close()
  }

  /** A read of a session (or, `null`, of all the tenant's sessions) after its writes, its failure said as a StoreError. */
  private async read<T>(keyName: string, sessionId: string | null, read: () => Promise<T>, failed: 'read' | 'written' = 'read'): Promise<T> {
    try {
      await (sessionId === null ? this.writes.settledTenant(keyName) : this.writes.settled(keyName, sessionId))
      return await read()
    } catch (err) {
      if (err instanceof InvalidCursorError || err instanceof StoreError) throw err
      throw new StoreError(`the record store could not be ${failed}: ${err instanceof Error ? err.message : String(err)}`, { cause: err, failed })
    }
  }
}
