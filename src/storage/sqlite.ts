import { closeSync, existsSync, fchmodSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import type {
  ActivityRow,
  ActivityTally,
  CachedSummary,
  CompactionRecord,
  DeletedSession,
  EntryPage,
  MemoryOwner,
  MemoryRow,
  Recap,
  RecallHit,
  RecallQuery,
  RecordPage,
  SessionOwner,
  SessionPage,
  SessionSummary,
  Store,
  CompactionDetail
} from './store.js'
import type { TimelinePoint } from '../contract/schemas.js'
import { type ColdSaved, StoreError, sessionSummary } from './store.js'
import { type ColdRow, Retried, type StoredRecord, TOMBSTONE_MS, activityScope, decodeCursor, encodeCursor, openRecord, recallHit } from './common.js'
import { MAX_SESSION_MEMORY, MAX_SESSION_MEMORY_BYTES } from '../contract/defaults.js'
import { type Candidate, rankBm25 } from './rank.js'
import { byLines, candidatesFor } from './lines.js'
import { type KeyMaterial, KeyRing } from './keyring.js'
import { at } from '../compaction/at.js'
import { type Reads, ReaderPool, type SqliteRunner, StoreThread, type Writes, inlineRunner } from './sqlite-threads.js'
import { MIGRATIONS, recordFigures, sessionKey } from './sqlite-schema.js'
import { Terms, compactionOwner, ownerOf, seal, unseal } from './sealing.js'

export const SCHEMA_VERSION = MIGRATIONS.length

/**
 * Creates a folder and its missing parents one level at a time. (Node's recursive mkdir loops forever
 * on some paths, such as one under /proc; one level at a time fails at once with the real reason.)
 */
function makeFolder(folder: string): void {
  const missing: string[] = []
  for (let dir = folder; !existsSync(dir); dir = dirname(dir)) {
    missing.push(dir)
    if (dirname(dir) === dir) break
  }
  for (const dir of missing.reverse()) mkdirSync(dir)
}

/**
 * A connection as the store uses it: WAL (readers never wait for the writer), synchronous NORMAL, a busy
 * timeout; deleted content overwritten with zeros (secure_delete), and a new file made able to give freed
 * pages back (auto_vacuum, which only a file without tables takes, and only before it is in WAL mode).
 */
export function openConnection(path: string): Database.Database {
  const db = new Database(path)
  db.pragma('auto_vacuum = INCREMENTAL')
  db.pragma('secure_delete = ON')
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
  return db
}

/** How long a statement waits for a lock another connection holds. */
const BUSY_TIMEOUT_MS = 5_000
/**
 * How long emptying the WAL waits for the readers before it says it is kept busy (and is retried, every
 * RECLAIM_RETRY_MS): a reader's transaction can last any time, and the writer's thread, which every write
 * of the store goes through, must not wait out the busy timeout for it.
 */
const CHECKPOINT_WAIT_MS = 100

/**
 * How long one slice of a deletion, a prune or a reclaim holds the writer: it works in small steps and
 * commits once this has passed, so that a write asked meanwhile waits about this long at most
 * (bench/scale-store.ts measures the wait).
 */
export const SLICE_MS = 40
/** Rows of one step of a slice. */
const STEP_ROWS = 100
/**
 * Most rows of a kind one slice deletes: deleting is cheap but its commit writes every page it touched,
 * zeroed, to the WAL, so that a slice's commit, not its deletes, is what other writes wait for.
 */
const SLICE_ROWS = 1_000
/** Freed pages one step of reclaiming gives back. */
const STEP_PAGES = 256

/**
 * The store's writes on one connection, run where that connection lives: in the writer thread for a file
 * (sqlite-threads.ts), in the calling thread for `:memory:` (no second connection can see it). Every text
 * is sealed under its session's key (sealing.ts) before it is written.
 */
export class SqliteWrites {
  private readonly statements

  constructor(
    private readonly db: Database.Database,
    /** Most cold-layer entries kept a session (the oldest go first). */
    private readonly maxSessionMemory = MAX_SESSION_MEMORY,
    /** Most bytes of text a session's cold layer keeps (the oldest entries go first). */
    private readonly maxSessionBytes = MAX_SESSION_MEMORY_BYTES,
    /** How its session keys are wrapped and opened. */
    private readonly ring = new KeyRing()
  ) {
    this.statements = {
      insertRecord: db.prepare('INSERT INTO records (id, owner, key_name, created_ms, raw, after, budget, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
      upsertSession: db.prepare(
        `INSERT INTO sessions (owner, key_name, session, n, first_ms, last_seq) VALUES (?, ?, ?, 1, ?, ?)
           ON CONFLICT (owner) DO UPDATE SET n = n + 1, first_ms = min(first_ms, excluded.first_ms), last_seq = max(last_seq, excluded.last_seq)`
      ),
      putCache: db.prepare(
        'INSERT INTO cache (key, owner, value, expires_ms) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, value = excluded.value, expires_ms = excluded.expires_ms'
      ),
      keepCache: db.prepare('INSERT INTO cache (key, owner, value, expires_ms) VALUES (?, NULL, ?, ?) ON CONFLICT (key) DO NOTHING'),
      ownedKeys: db.prepare('SELECT key FROM cache WHERE owner = ?').pluck(),
      deleteRecords: db.prepare('DELETE FROM records WHERE owner = ?'),
      deleteCache: db.prepare('DELETE FROM cache WHERE owner = ?'),
      deleteSessionRow: db.prepare('DELETE FROM sessions WHERE owner = ?'),
      deleteKey: db.prepare('DELETE FROM session_keys WHERE owner = ?'),
      coldOf: db.prepare('SELECT count(*) AS n, max(id) AS through FROM cold WHERE owner = ?'),
      // whether an owner has any entry, any cache row left (one look in the index, not a count of a capped session's 50,000)
      anyCold: db.prepare('SELECT 1 FROM cold WHERE owner = ? LIMIT 1').pluck(),
      anyCached: db.prepare('SELECT 1 FROM cache WHERE owner = ? LIMIT 1').pluck(),
      coldSlice: db.prepare('SELECT id FROM cold WHERE owner = ? AND id <= ? ORDER BY id LIMIT ?').pluck(),
      insertCold: db.prepare(
        'INSERT INTO cold (owner, compaction_id, kind, body, msg_from, msg_to, created_ms, line_from, line_to, words, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'
      ),
      // the newest entry past the session's bound in bytes: it and every older one go
      bytesFrom: db
        .prepare(
          'SELECT id FROM (SELECT id, sum(coalesce(bytes, length(body))) OVER (ORDER BY id DESC) AS total FROM cold WHERE owner = ?) WHERE total > ? LIMIT 1'
        )
        .pluck(),
      sessionBytes: db.prepare('SELECT sum(coalesce(bytes, length(body))) FROM cold WHERE owner = ?').pluck(),
      insertTerms: db.prepare('INSERT INTO cold_terms (rowid, terms) VALUES (?, ?)'),
      capFrom: db.prepare('SELECT id FROM cold WHERE owner = ? ORDER BY id DESC LIMIT 1 OFFSET ?').pluck(),
      deleteTerms: db.prepare('DELETE FROM cold_terms WHERE rowid = ?'),
      deleteColdRow: db.prepare('DELETE FROM cold WHERE id = ?'),
      oldCold: db.prepare('SELECT id FROM cold WHERE created_ms < ? ORDER BY created_ms LIMIT ?').pluck(),
      oldRecords: db.prepare('SELECT seq, owner FROM records WHERE created_ms < ? ORDER BY created_ms LIMIT ?'),
      deleteRecord: db.prepare('DELETE FROM records WHERE seq = ?'),
      sessionFigures: db.prepare('SELECT count(*) AS n, min(created_ms) AS first_ms FROM records WHERE owner = ?'),
      refreshSession: db.prepare('UPDATE sessions SET n = ?, first_ms = ? WHERE owner = ?'),
      pruneCache: db.prepare('DELETE FROM cache WHERE key IN (SELECT key FROM cache WHERE expires_ms <= ? LIMIT ?)'),
      addActivity: db.prepare(
        `INSERT INTO activity (key_name, scope, hour_ms, name, value) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (key_name, scope, hour_ms, name) DO UPDATE SET value = CASE WHEN name LIKE 'max:%' THEN max(value, excluded.value) ELSE value + excluded.value END`
      ),
      deleteActivity: db.prepare('DELETE FROM activity WHERE key_name = ? AND scope = ?'),
      pruneActivity: db.prepare(
        'DELETE FROM activity WHERE (key_name, scope, hour_ms, name) IN (SELECT key_name, scope, hour_ms, name FROM activity WHERE hour_ms < ? LIMIT ?)'
      ),
      health: db.prepare('INSERT INTO health (id, checked_ms) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET checked_ms = excluded.checked_ms'),
      tombstone: db.prepare('SELECT deleted_ms FROM tombstones WHERE owner = ?').pluck(),
      bury: db.prepare(
        'INSERT INTO tombstones (owner, deleted_ms) VALUES (?, ?) ON CONFLICT(owner) DO UPDATE SET deleted_ms = max(deleted_ms, excluded.deleted_ms)'
      ),
      pruneTombstones: db.prepare('DELETE FROM tombstones WHERE deleted_ms < ?')
    }
  }

  /** Whether the owner was deleted at or after `since` (the write's work began before the deletion): then nothing of it is written. */
  private buried(owner: string, since: number): boolean {
    const deleted = this.statements.tombstone.get(owner) as number | undefined
    return deleted !== undefined && deleted >= since
  }

  /** A record, sealed under its session's key (a record without a session is kept as it is: no deletion names it). */
  saveRecord(row: RecordRow): void {
    const createdMs = Date.parse(row.created_at)
    const since = row.since ?? createdMs
    const { raw, after, budget } = recordFigures(row.record)
    this.db.transaction(() => {
      if (row.session_id === null) {
        // a compaction without a session: sealed under a key of its own, deleted with it by its id
        const owner = compactionOwner(row.key_name, row.id)
        if (this.buried(owner, since)) return
        this.statements.insertRecord.run(row.id, owner, row.key_name, createdMs, raw, after, budget, seal(sessionKey(this.db, owner, this.ring), row.record))
        return
      }
      const owner = ownerOf(row.key_name, row.session_id)
      if (this.buried(owner, since)) return
      const key = sessionKey(this.db, owner, this.ring)
      const seq = this.statements.insertRecord.run(row.id, owner, row.key_name, createdMs, raw, after, budget, seal(key, row.record)).lastInsertRowid
      this.statements.upsertSession.run(owner, row.key_name, seal(key, row.session_id), createdMs, seq)
    })()
  }

  putCached(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): void {
    const json = JSON.stringify(value)
    if (!owner) {
      this.statements.putCache.run(key, null, Buffer.from(json), expiresAtMs)
      return
    }
    const id = ownerOf(owner.key_name, owner.session_id)
    this.db.transaction(() => {
      if (this.buried(id, owner.since_ms ?? Date.now())) return
      this.statements.putCache.run(key, id, seal(sessionKey(this.db, id, this.ring), json), expiresAtMs)
    })()
  }

  /** The value kept under `key`, this one where none is (never replaced: the first writer's stays). */
  firstState(key: string, value: unknown): unknown {
    this.statements.keepCache.run(key, Buffer.from(JSON.stringify(value)), Number.MAX_SAFE_INTEGER)
    const row = this.db.prepare('SELECT value FROM cache WHERE key = ?').get(key) as { value: Buffer }
    return JSON.parse(row.value.toString('utf8')) as unknown
  }

  /** Tallies added (or raised, for `max:` names), in one transaction; none of a session deleted since its hour began. */
  addActivity(tallies: readonly ActivityTally[]): void {
    this.db.transaction(() => {
      for (const t of tallies) {
        if (t.session_id !== null && this.buried(ownerOf(t.key_name, t.session_id), t.hour_ms)) continue
        this.statements.addActivity.run(t.key_name, activityScope(t.key_name, t.session_id), t.hour_ms, t.name, t.value)
      }
    })()
  }

  /**
   * Deletes a tenant's session's key, records, cached rows and list row in one transaction (a few rows,
   * whatever the session holds): from its commit, nothing of the session can be read, its cold layer
   * included. The cold layer's rows (through `through`) are then deleted in slices (deleteCold).
   */
  deleteSession(sessionId: string, keyName: string): Omit<DeletedSession, 'space_reclaimed'> & { through: number } {
    const owner = ownerOf(keyName, sessionId)
    return this.db.transaction(() => {
      const keys = this.statements.ownedKeys.all(owner) as string[]
      const cold = this.statements.coldOf.get(owner) as { n: number; through: number | null }
      const compactions = this.statements.deleteRecords.run(owner).changes
      const cached = this.statements.deleteCache.run(owner).changes
      this.statements.deleteSessionRow.run(owner)
      this.statements.deleteKey.run(owner)
      this.statements.deleteActivity.run(keyName, owner)
      this.statements.bury.run(owner, Date.now())
      return { compactions, cold_layer: cold.n, cached, cache_keys: keys, through: cold.through ?? 0 }
    })()
  }

  /** A compaction made without a session deleted by its id: its record and its key; whether there was one. */
  deleteCompaction(compactionId: string, keyName: string): boolean {
    const owner = compactionOwner(keyName, compactionId)
    return this.db.transaction(() => {
      const deleted = this.statements.deleteRecords.run(owner).changes
      this.statements.deleteKey.run(owner)
      if (deleted > 0) this.statements.bury.run(owner, Date.now())
      return deleted > 0
    })()
  }

  /** A slice (SLICE_MS) of a deleted session's cold-layer entries (those through `through`), rows and terms; whether any are left. */
  deleteCold(sessionId: string, keyName: string, through: number): { deleted: number; more: boolean } {
    const owner = ownerOf(keyName, sessionId)
    return this.db.transaction(() => {
      const started = performance.now()
      let deleted = 0
      for (;;) {
        const ids = this.statements.coldSlice.all(owner, through, STEP_ROWS) as number[]
        for (const id of ids) this.dropEntry(id)
        deleted += ids.length
        if (ids.length < STEP_ROWS) return { deleted, more: false }
        if (deleted >= SLICE_ROWS || performance.now() - started >= SLICE_MS) return { deleted, more: true }
      }
    })()
  }

  private dropEntry(id: number): void {
    this.statements.deleteTerms.run(id)
    this.statements.deleteColdRow.run(id)
  }

  /**
   * Gives up to RECLAIM_PAGES freed pages back to the file system (a file made with incremental vacuum, as
   * this version makes them); once none are left, empties the WAL. `done` once both are; `busy` where a
   * reader's snapshot kept the WAL from being emptied.
   */
  reclaim(): { done: boolean; busy: boolean } {
    const started = performance.now()
    if ((this.db.pragma('auto_vacuum', { simple: true }) as number) === 2) {
      while ((this.db.pragma('freelist_count', { simple: true }) as number) > 0) {
        if (performance.now() - started >= SLICE_MS) return { done: false, busy: false }
        this.db.pragma(`incremental_vacuum(${STEP_PAGES})`)
      }
    }
    this.db.pragma(`busy_timeout = ${CHECKPOINT_WAIT_MS}`)
    try {
      const [checkpoint] = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[]
      return { done: true, busy: checkpoint?.busy !== 0 }
    } finally {
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
    }
  }

  saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): ColdSaved {
    const createdMs = Date.parse(owner.created_at)
    const id = ownerOf(owner.key_name, owner.session_id)
    return this.db.transaction((): ColdSaved => {
      if (this.buried(id, owner.since_ms ?? createdMs)) return { evicted: 0 }
      const key = sessionKey(this.db, id, this.ring)
      const terms = new Terms(key)
      for (const r of rows) {
        const { terms: indexed, words } = terms.counted(r.text)
        const bytes = Buffer.byteLength(r.text)
        const lines = r.lines ?? [null, null]
        const rowid = this.statements.insertCold.run(
          id,
          owner.compaction_id,
          r.kind,
          seal(key, r.text),
          r.from,
          r.to,
          createdMs,
          ...lines,
          words,
          bytes
        ).lastInsertRowid
        this.statements.insertTerms.run(rowid, indexed)
      }
      // past either bound, the oldest entries go (their terms are tombstoned in the index, which a merge drops)
      const byCount = this.statements.capFrom.get(id, this.maxSessionMemory) as number | undefined
      const total = this.statements.sessionBytes.get(id) as number | null
      const byBytes =
        total !== null && total > this.maxSessionBytes ? (this.statements.bytesFrom.get(id, this.maxSessionBytes) as number | undefined) : undefined
      const capFrom = Math.max(byCount ?? -1, byBytes ?? -1)
      if (capFrom < 0) return { evicted: 0 }
      const old = this.statements.coldSlice.all(id, capFrom, Number.MAX_SAFE_INTEGER) as number[]
      for (const entry of old) this.dropEntry(entry)
      return { evicted: old.length }
    })()
  }

  /**
   * One slice (SLICE_MS) of the retention prune: cold-layer entries and records created before `beforeMs`
   * (the lists' rows of their sessions brought up to date), and expired cache rows, a step at a time.
   */
  pruneSlice(beforeMs: number, nowMs: number): { records: number; cache: number; memory: number; more: boolean } {
    return this.db.transaction(() => {
      const started = performance.now()
      const total = { records: 0, cache: 0, memory: 0, more: true }
      for (;;) {
        const entries = this.statements.oldCold.all(beforeMs, STEP_ROWS) as number[]
        for (const id of entries) this.dropEntry(id)
        const records = this.statements.oldRecords.all(beforeMs, STEP_ROWS) as { seq: number; owner: string | null }[]
        for (const r of records) this.statements.deleteRecord.run(r.seq)
        for (const owner of new Set(records.map((r) => r.owner))) {
          if (owner === null) continue
          const { n, first_ms } = this.statements.sessionFigures.get(owner) as { n: number; first_ms: number | null }
          if (n > 0) {
            this.statements.refreshSession.run(n, first_ms, owner)
            continue
          }
          this.statements.deleteSessionRow.run(owner)
          // the last of its data gone at retention: its key goes too
          if (this.statements.anyCold.get(owner) === undefined && this.statements.anyCached.get(owner) === undefined) this.statements.deleteKey.run(owner)
        }
        const cache = this.statements.pruneCache.run(nowMs, STEP_ROWS).changes
        const tallies = this.statements.pruneActivity.run(beforeMs, STEP_ROWS).changes
        // (a tombstone outlives any work begun before its deletion: a day)
        this.statements.pruneTombstones.run(nowMs - TOMBSTONE_MS)
        total.memory += entries.length
        total.records += records.length
        total.cache += cache
        if (Math.max(entries.length, records.length, cache, tallies) < STEP_ROWS) return { ...total, more: false }
        if (Math.max(total.memory, total.records, total.cache) >= SLICE_ROWS || performance.now() - started >= SLICE_MS) return total
      }
    })()
  }

  checkWritable(): void {
    this.statements.health.run(Date.now())
  }
}

/** The store's reads on one connection: in reader threads for a file, in the calling thread for `:memory:`. */
export class SqliteReads {
  private readonly statements

  constructor(
    db: Database.Database,
    /** How its session keys are opened. */
    private readonly ring = new KeyRing()
  ) {
    this.statements = {
      key: db.prepare('SELECT key FROM session_keys WHERE owner = ?').pluck(),
      page: db.prepare('SELECT seq, body FROM records WHERE owner = ? AND seq < ? ORDER BY seq DESC LIMIT ?'),
      sessions: db.prepare(
        `SELECT s.owner, s.session, s.n, s.first_ms, s.last_seq, k.key, r.id, r.created_ms, r.raw, r.after
           FROM sessions s JOIN session_keys k ON k.owner = s.owner JOIN records r ON r.seq = s.last_seq
          WHERE s.key_name = ? AND s.last_seq < ? ORDER BY s.last_seq DESC LIMIT ?`
      ),
      cache: db.prepare('SELECT c.value, c.owner, k.key FROM cache c LEFT JOIN session_keys k ON k.owner = c.owner WHERE c.key = ? AND c.expires_ms > ?'),
      latest: db.prepare('SELECT body FROM records WHERE owner = ? ORDER BY seq DESC LIMIT 1').pluck(),
      count: db.prepare('SELECT n FROM sessions WHERE owner = ?').pluck(),
      record: db.prepare('SELECT body FROM records WHERE owner = ? AND id = ?').pluck(),
      timeline: db.prepare('SELECT id, created_ms, raw, after, budget FROM records WHERE owner = ? ORDER BY seq DESC LIMIT ?'),
      kinds: db.prepare('SELECT kind, count(*) AS n FROM cold WHERE owner = ? AND compaction_id = ? GROUP BY kind'),
      entries: db.prepare('SELECT id, kind, body, msg_from, msg_to FROM cold WHERE owner = ? AND compaction_id = ? AND id > ? ORDER BY id LIMIT ?'),
      activity: db.prepare('SELECT hour_ms, name, value FROM activity WHERE key_name = ? AND scope = ? AND hour_ms >= ? AND hour_ms < ?'),
      instances: db.prepare('SELECT doc, count(*) AS n FROM cold_vocab WHERE term = ? GROUP BY doc'),
      sizes: db.prepare('SELECT id, kind, words FROM cold INDEXED BY cold_sizes WHERE owner = ?'),
      entry: db.prepare('SELECT kind, body, compaction_id, msg_from, msg_to, created_ms, line_from, line_to FROM cold WHERE id = ?')
    }
  }

  /** The session's owner and key; undefined for a session the tenant has nothing of. */
  private session(sessionId: string, keyName: string): { owner: string; key: Buffer } | undefined {
    const owner = ownerOf(keyName, sessionId)
    const key = this.statements.key.get(owner) as Buffer | undefined
    return key ? { owner, key: this.ring.open(owner, key) } : undefined
  }

  activity(keyName: string, sessionId: string | null, fromMs: number, toMs: number): ActivityRow[] {
    return this.statements.activity.all(keyName, activityScope(keyName, sessionId), fromMs, toMs) as ActivityRow[]
  }

  listRecords(sessionId: string, keyName: string, before: number, limit: number): { records: CompactionRecord[]; last: number | null } {
    const s = this.session(sessionId, keyName)
    if (!s) return { records: [], last: null }
    const rows = this.statements.page.all(s.owner, before, limit + 1) as { seq: number; body: Buffer }[]
    const page = rows.slice(0, limit)
    return { records: page.map((r) => openRecord(s.key, r.body)), last: rows.length > limit ? at(page, page.length - 1).seq : null }
  }

  listSessions(keyName: string, before: number, limit: number): { sessions: SessionSummary[]; last: number | null } {
    const rows = this.statements.sessions.all(keyName, before, limit + 1) as {
      owner: string
      session: Buffer
      n: number
      first_ms: number
      last_seq: number
      key: Buffer
      id: string
      created_ms: number
      raw: number
      after: number
    }[]
    const page = rows.slice(0, limit)
    return {
      sessions: page.map((r) => sessionSummary({ ...r, session_id: unseal(this.ring.open(r.owner, r.key), r.session) })),
      last: rows.length > limit ? at(page, page.length - 1).last_seq : null
    }
  }

  cached(key: string, nowMs: number): unknown {
    const row = this.statements.cache.get(key, nowMs) as { value: Buffer; owner: string | null; key: Buffer | null } | undefined
    if (!row) return undefined
    if (row.owner === null) return JSON.parse(row.value.toString('utf8')) as unknown
    // a row of a session being deleted (its key gone first) reads as none
    return row.key ? (JSON.parse(unseal(this.ring.open(row.owner, row.key), row.value)) as unknown) : undefined
  }

  recall(sessionId: string, keyName: string, query: RecallQuery): RecallHit[] {
    const s = this.session(sessionId, keyName)
    if (!s) return []
    const terms = new Terms(s.key).query(query.text)
    if (terms.length === 0) return []
    const kinds = query.kinds && query.kinds.length > 0 ? new Set(query.kinds) : undefined
    // The session's terms are its own (HMACs under its key): each term's instances are the session's. How
    // often each occurs in each entry, then the session's figures and its entries' lengths and kinds from
    // one pass over its covering index; BM25 over those alone (rank.ts).
    const tf = new Map<number, Map<number, number>>()
    terms.forEach((term, q) => {
      for (const { doc, n } of this.statements.instances.all(term) as { doc: number; n: number }[]) {
        let of = tf.get(doc)
        if (!of) tf.set(doc, (of = new Map()))
        of.set(q, n)
      }
    })
    if (tf.size === 0) return []
    let entries = 0
    let words = 0
    let measured = 0
    const candidates: Candidate[] = []
    for (const row of this.statements.sizes.iterate(s.owner) as Iterable<{ id: number; kind: string; words: number | null }>) {
      entries++
      if (row.words !== null) {
        words += row.words
        measured++
      }
      const found = tf.get(row.id)
      if (found && (!kinds || kinds.has(row.kind))) candidates.push({ id: row.id, words: row.words, tf: found })
    }
    const ranked = rankBm25(candidates, { entries, meanWords: measured > 0 ? words / measured : 0 }, terms.length, candidatesFor(query.limit))
    const hits = ranked.flatMap(({ id, score }) => {
      const r = this.statements.entry.get(id) as ColdRow | undefined
      return r ? [recallHit(s.key, r, score)] : []
    })
    return byLines(hits, query.text, query.limit)
  }

  compaction(sessionId: string, keyName: string, compactionId: string): CompactionDetail | undefined {
    const s = this.session(sessionId, keyName)
    const body = s && (this.statements.record.get(s.owner, compactionId) as Buffer | undefined)
    if (!s || !body) return undefined
    const kinds = this.statements.kinds.all(s.owner, compactionId) as { kind: string; n: number }[]
    return { record: openRecord(s.key, body), memory: Object.fromEntries(kinds.map((k) => [k.kind, k.n])) }
  }

  entries(sessionId: string, keyName: string, compactionId: string, after: number, limit: number): EntryPage {
    const s = this.session(sessionId, keyName)
    if (!s) return { entries: [], last: null }
    const rows = this.statements.entries.all(s.owner, compactionId, after, limit + 1) as {
      id: number
      kind: string
      body: Buffer
      msg_from: number
      msg_to: number
    }[]
    const page = rows.slice(0, limit)
    return {
      entries: page.map((r) => ({ kind: r.kind, text: unseal(s.key, r.body), messages: [r.msg_from, r.msg_to] })),
      last: rows.length > limit ? at(page, page.length - 1).id : null
    }
  }

  timeline(sessionId: string, keyName: string, limit: number): TimelinePoint[] {
    const s = this.session(sessionId, keyName)
    if (!s) return []
    const rows = this.statements.timeline.all(s.owner, limit) as { id: string; created_ms: number; raw: number; after: number; budget: number | null }[]
    return rows.reverse().map((r) => ({
      compaction_id: r.id,
      created_at: new Date(r.created_ms).toISOString(),
      raw_history_tokens: r.raw,
      context_after_compaction: r.after,
      budget_tokens: r.budget
    }))
  }

  recap(sessionId: string, keyName: string): Recap | undefined {
    const s = this.session(sessionId, keyName)
    const body = s && (this.statements.latest.get(s.owner) as Buffer | undefined)
    if (!s || !body) return undefined
    return { record: openRecord(s.key, body), compactions: (this.statements.count.get(s.owner) as number | undefined) ?? 1 }
  }
}

export interface SqliteStoreOptions {
  /**
   * Where reads and writes run: `thread`, threads with connections of their own (the default for a file:
   * a writer, and READER_THREADS readers; the event loop never waits for SQLite), or `inline`, on this
   * thread's connection (the only choice for `:memory:`).
   */
  writer?: 'thread' | 'inline'
  /** Most cold-layer entries kept a session (MAX_SESSION_MEMORY). */
  maxSessionMemory?: number
  /** Most bytes of text a session's cold layer keeps (MAX_SESSION_MEMORY_BYTES). */
  maxSessionBytes?: number
  /** The master keys its session keys are wrapped under (none: kept as they are). */
  keys?: KeyMaterial
}

/** Reader threads of a store in a file: a slow recall holds one, the other answers the proxy's look-ups. */
export const READER_THREADS = 2

/** SQLite through better-sqlite3, in WAL mode: reads and writes in threads of their own, or inline. */
export class SqliteStore implements Store {
  private readonly db: Database.Database
  /** How its session keys are wrapped and opened (the threads hold rings of the same keys). */
  readonly ring: KeyRing
  private readonly writer: SqliteRunner<Writes>
  private readonly reader: SqliteRunner<Reads>

  /** Opens (creating the file and its folder) and migrates; throws a StoreError naming the file on failure. */
  constructor(
    readonly path: string,
    options: SqliteStoreOptions = {}
  ) {
    try {
      if (path !== ':memory:') makeFolder(dirname(path))
      this.db = openConnection(path)
      this.migrate()
    } catch (err) {
      throw new StoreError(`cannot open the database ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err })
    }
    const inline = path === ':memory:' || options.writer === 'inline'
    const keys = options.keys ?? {}
    this.ring = new KeyRing(keys)
    if (path !== ':memory:') {
      this.journalFd = this.replayJournal(`${path}-records.journal`)
      const tombstone = this.db.prepare('SELECT deleted_ms FROM tombstones WHERE owner = ?').pluck()
      this.journal = (record, since) => {
        // (a compaction begun before its session's deletion is not journaled after it: a replay would bring it back)
        const owner = record.session_id === null ? compactionOwner(record.key_name, record.id) : ownerOf(record.key_name, record.session_id)
        const deleted = tombstone.get(owner) as number | undefined
        if (deleted !== undefined && deleted >= (since ?? Date.parse(record.created_at))) return
        if (this.journalFd !== undefined) this.append(this.journalFd, record)
      }
    }
    this.writer = inline
      ? inlineRunner<Writes>(new SqliteWrites(this.db, options.maxSessionMemory, options.maxSessionBytes, this.ring))
      : new StoreThread<Writes>('write', path, { maxSessionMemory: options.maxSessionMemory, maxSessionBytes: options.maxSessionBytes, keys })
    this.reader = path === ':memory:' ? inlineRunner<Reads>(new SqliteReads(this.db, this.ring)) : new ReaderPool(path, READER_THREADS, keys)
  }

  /** The journal's file, open for appending (its owner's alone); undefined for `:memory:`. A rewrite puts a new file in its place. */
  private journalFd: number | undefined
  /** Records journaled and not yet written; once none are, the journal is emptied. */
  private readonly unwritten = new Set<string>()
  private journaledBytes = 0

  /**
   * Writes the records a journal holds that the file does not (those of compactions answered before the
   * last process stopped, however it stopped), empties it, and returns it open for appending. Runs before
   * the writer thread starts: this connection is the only writer then.
   */
  private replayJournal(file: string): number {
    const fd = openSync(file, 'a+', 0o600)
    fchmodSync(fd, 0o600) // (a journal made by an earlier build took the process's umask)
    const writes = new SqliteWrites(this.db, undefined, undefined, this.ring)
    const known = this.db.prepare('SELECT 1 FROM records WHERE id = ?')
    for (const line of readFileSync(fd, 'utf8').split('\n')) {
      if (line === '') continue
      try {
        const record = JSON.parse(line) as StoredRecord
        if (known.get(record.id) === undefined) writes.saveRecord(recordRow(record, line))
      } catch {
        // a line cut by the kill that made the journal needed: its answer was never given
      }
    }
    ftruncateSync(fd, 0)
    return fd
  }

  /** Store.journal: only for a file (`:memory:` keeps nothing through a kill anyway). */
  readonly journal?: (record: CompactionRecord, since?: number) => void

  /** Records journaled, as the JSON the journal holds: their write sends it as it is. */
  private readonly serialized = new WeakMap<CompactionRecord, string>()

  private append(fd: number, record: CompactionRecord): void {
    const json = JSON.stringify(stored(record))
    this.serialized.set(record, json)
    const line = `${json}\n`
    try {
      writeSync(fd, line)
    } catch (err) {
      // a part of the line written (a full disk): cut back, so that the journal goes on whole once there is room
      try {
        ftruncateSync(fd, this.journaledBytes)
      } catch {
        // the cut line is the replay's to skip
      }
      throw err
    }
    this.journaledBytes += Buffer.byteLength(line)
    this.unwritten.add(record.id)
  }

  private migrate(): void {
    const current = this.db.pragma('user_version', { simple: true }) as number
    if (current > MIGRATIONS.length) {
      throw new StoreError(`schema version ${current} is newer than this build knows (${MIGRATIONS.length})`)
    }
    for (let v = current; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        const migration = at(MIGRATIONS, v)
        if (typeof migration === 'string') this.db.exec(migration)
        else migration(this.db)
        this.db.pragma(`user_version = ${v + 1}`)
      })()
    }
  }

  async saveRecord(record: CompactionRecord, since?: number): Promise<void> {
    try {
      // a string crosses to the writer thread as one copy, where the record's objects were cloned one by one
      await this.writer.run('saveRecord', [recordRow(record, this.serialized.get(record) ?? JSON.stringify(stored(record)), since)])
    } finally {
      // once every journaled record is in the file (or has failed, and was counted), the journal can go
      if (this.unwritten.delete(record.id) && this.unwritten.size === 0 && this.journalFd !== undefined && this.journaledBytes > JOURNAL_KEEP_BYTES) {
        ftruncateSync(this.journalFd, 0)
        this.journaledBytes = 0
      }
    }
  }

  async listRecords(sessionId: string, keyName: string, options: { limit: number; cursor?: string }): Promise<RecordPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const page = await this.reader.run('listRecords', [sessionId, keyName, before, options.limit])
    return { records: page.records, next_cursor: page.last === null ? null : encodeCursor(page.last) }
  }

  async listSessions(keyName: string, options: { limit: number; cursor?: string }): Promise<SessionPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const page = await this.reader.run('listSessions', [keyName, before, options.limit])
    return { sessions: page.sessions, next_cursor: page.last === null ? null : encodeCursor(page.last) }
  }

  async getCached(key: string, nowMs: number): Promise<CachedSummary | undefined> {
    return (await this.reader.run('cached', [key, nowMs])) as CachedSummary | undefined
  }

  async putCached(key: string, value: CachedSummary, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.writer.run('putCached', [key, value, expiresAtMs, owner])
  }

  async getState(key: string, nowMs: number): Promise<unknown> {
    return this.reader.run('cached', [key, nowMs])
  }

  async putState(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.writer.run('putCached', [key, value, expiresAtMs, owner])
  }

  async firstState(key: string, value: unknown): Promise<unknown> {
    return this.writer.run('firstState', [key, value])
  }

  /**
   * Deleted by the writer (after every write asked for before it): the session's key and its few rows at
   * once, then its cold layer in slices (SLICE_MS) that other writes come between, then the freed pages given back
   * and the WAL emptied; taken out of the records' journal too.
   */
  async deleteCompaction(compactionId: string, keyName: string): Promise<boolean> {
    const drop = (r: StoredRecord): boolean => r.key_name === keyName && r.id === compactionId && r.session_id === null
    // out of the journal first: a kill after the deletion's commit then replays nothing of it
    this.rewriteJournal(drop)
    const deleted = await this.writer.run('deleteCompaction', [compactionId, keyName])
    this.rewriteJournal(drop)
    return deleted
  }

  async deleteSession(sessionId: string, keyName: string): Promise<DeletedSession> {
    const drop = (r: StoredRecord): boolean => r.key_name === keyName && r.session_id === sessionId
    // out of the journal first: a kill after the deletion's commit then replays nothing of it; and again after,
    // for a record journaled meanwhile (its write, asked for before the deletion, is deleted by it)
    this.rewriteJournal(drop)
    const { through, ...deleted } = await this.writer.run('deleteSession', [sessionId, keyName])
    this.rewriteJournal(drop)
    // (nothing of it here: space is reclaimed unless an earlier deletion's reclaiming is still being retried)
    if (deleted.compactions + deleted.cold_layer + deleted.cached === 0)
      return { ...deleted, space_reclaimed: !this.reclaiming.pending, ...(this.reclaiming.pending ? { reclaim_failure: RECLAIM_PENDING } : {}) }
    while ((await this.writer.run('deleteCold', [sessionId, keyName, through])).more);
    if (await this.reclaimOnce()) return { ...deleted, space_reclaimed: true }
    this.reclaiming.start()
    return { ...deleted, space_reclaimed: false, reclaim_failure: 'a reader kept the WAL from being emptied: retried until it is' }
  }

  /** A deletion's freed pages given back and the WAL emptied; whether both were (a reader's snapshot may keep the WAL). */
  private async reclaimOnce(): Promise<boolean> {
    let reclaimed = await this.writer.run('reclaim', [])
    while (!reclaimed.done) reclaimed = await this.writer.run('reclaim', [])
    return !reclaimed.busy
  }

  /** Reclaiming that could not finish, retried (every RECLAIM_RETRY_MS) until it does or the store closes. */
  private readonly reclaiming = new Retried(RECLAIM_RETRY_MS, () => this.reclaimOnce())

  /**
   * The journal without the records `drop` picks (in this thread, where appends are made: none comes between),
   * atomically: the records kept written to a new file of its owner's alone, flushed, and renamed over the old,
   * so that a kill at any moment leaves the old journal or the new one, never a part of either.
   */
  private rewriteJournal(drop: (record: StoredRecord) => boolean): void {
    if (this.journalFd === undefined) return
    const file = `${this.path}-records.journal`
    // (read by its name: the appending descriptor's offset is at its end)
    const kept = readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => {
        if (line === '') return false
        try {
          return !drop(JSON.parse(line) as StoredRecord)
        } catch {
          return false // a line cut by a kill: no record, and no answer was given for it
        }
      })
    const text = kept.map((line) => `${line}\n`).join('')
    const next = `${file}.next`
    const fd = openSync(next, 'w', 0o600)
    try {
      if (text !== '') writeSync(fd, text)
      fsyncSync(fd)
    } catch (err) {
      closeSync(fd)
      throw err
    }
    closeSync(fd)
    renameSync(next, file)
    closeSync(this.journalFd)
    this.journalFd = openSync(file, 'a+', 0o600)
    this.journaledBytes = Buffer.byteLength(text)
  }

  async addActivity(tallies: readonly ActivityTally[]): Promise<void> {
    if (tallies.length > 0) await this.writer.run('addActivity', [tallies])
  }

  async activity(keyName: string, sessionId: string | null, range: { fromMs: number; toMs: number }): Promise<ActivityRow[]> {
    return this.reader.run('activity', [keyName, sessionId, range.fromMs, range.toMs])
  }

  async saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<ColdSaved> {
    if (rows.length === 0) return { evicted: 0 }
    return this.writer.run('saveMemory', [owner, rows])
  }

  async recall(sessionId: string, keyName: string, query: RecallQuery): Promise<RecallHit[]> {
    return this.reader.run('recall', [sessionId, keyName, query])
  }

  async compaction(sessionId: string, keyName: string, compactionId: string): Promise<CompactionDetail | undefined> {
    return this.reader.run('compaction', [sessionId, keyName, compactionId])
  }

  async timeline(sessionId: string, keyName: string, limit: number): Promise<TimelinePoint[]> {
    return this.reader.run('timeline', [sessionId, keyName, limit])
  }

  async entries(sessionId: string, keyName: string, compactionId: string, options: { after: number; limit: number }): Promise<EntryPage> {
    return this.reader.run('entries', [sessionId, keyName, compactionId, options.after, options.limit])
  }

  async recap(sessionId: string, keyName: string): Promise<Recap | undefined> {
    return this.reader.run('recap', [sessionId, keyName])
  }

  /**
   * In slices (SLICE_MS each), each a write of its own: other writes come between them; then the freed
   * pages given back to the file system, in slices too (a file this version made).
   */
  async prune(beforeMs: number, nowMs: number): Promise<{ records: number; cache: number; memory: number }> {
    const total = { records: 0, cache: 0, memory: 0 }
    for (;;) {
      const slice = await this.writer.run('pruneSlice', [beforeMs, nowMs])
      total.records += slice.records
      total.cache += slice.cache
      total.memory += slice.memory
      if (!slice.more) break
    }
    if (total.records + total.cache + total.memory > 0) while (!(await this.writer.run('reclaim', [])).done);
    return total
  }

  async checkWritable(): Promise<void> {
    await this.writer.run('checkWritable', [])
  }

  room(): Promise<void> {
    return this.writer.room()
  }

  /** This thread's connection (migrations and the journal's replay; reads and writes too for `:memory:`, writes when inline), for tests that must look at the file or make the disk misbehave. */
  get connection(): Database.Database {
    return this.db
  }

  /** Closes after every write asked for so far is done. */
  async close(): Promise<void> {
    this.reclaiming.stop()
    await this.writer.close()
    await this.reader.close()
    if (this.journalFd !== undefined && this.unwritten.size === 0) ftruncateSync(this.journalFd, 0)
    if (this.journalFd !== undefined) closeSync(this.journalFd)
    if (this.db.open) this.db.close()
  }
}

/** A record as SQLite keeps it: the text of its summary, not its sections. */
function stored(record: CompactionRecord): StoredRecord {
  return { ...record, summary: { text: record.summary.text } }
}

/** A record's row: its columns, and the record as JSON (`json`, that of `stored(record)`). */
export interface RecordRow {
  id: string
  session_id: string | null
  key_name: string
  created_at: string
  record: string
  /** When the compaction began (its created_at where not given): a deletion after it refuses the record. */
  since?: number
}

function recordRow(record: Pick<StoredRecord, 'id' | 'session_id' | 'key_name' | 'created_at'>, json: string, since?: number): RecordRow {
  return {
    id: record.id,
    session_id: record.session_id,
    key_name: record.key_name,
    created_at: record.created_at,
    record: json,
    ...(since !== undefined ? { since } : {})
  }
}

/** How often a deletion's reclaiming that could not finish is tried again. */
const RECLAIM_RETRY_MS = 1_000
/** What a deletion says while an earlier one's reclaiming is still being retried. */
const RECLAIM_PENDING = "an earlier deletion's space is still being reclaimed (a reader keeps the WAL)"

/** The journal is emptied once nothing in it is unwritten and it has grown past this. */
const JOURNAL_KEEP_BYTES = 1 << 20
