import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import type { CachedSummary, CompactionRecord, DeletedSession, MemoryOwner, MemoryRow, Recap, RecallHit, RecallQuery, RecordPage, SessionOwner, SessionPage, SessionRow, Store, CompactionDetail, TimelinePoint } from './store.js'
import { StoreError, sessionSummary } from './store.js'
import { KIND_WEIGHT, MAX_SESSION_MEMORY, type StoredRecord, decodeCursor, encodeCursor, queryWords, withSections } from './common.js'
import { at } from '../compaction/index.js'
import { type SqliteWriter, WriterThread, inlineWriter } from './sqlite-writer.js'

/**
 * Schema migrations, versioned in code: migration N brings `user_version` from N-1 to N. Append only;
 * never edit one that has shipped.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE compactions (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     id TEXT NOT NULL UNIQUE,
     session_id TEXT,
     key_name TEXT NOT NULL,
     created_at TEXT NOT NULL,
     created_ms INTEGER NOT NULL,
     record TEXT NOT NULL
   );
   CREATE INDEX compactions_by_session ON compactions (key_name, session_id, seq);
   CREATE INDEX compactions_by_age ON compactions (created_ms);
   CREATE TABLE summary_cache (
     key TEXT PRIMARY KEY,
     value TEXT NOT NULL,
     expires_ms INTEGER NOT NULL
   );
   CREATE INDEX summary_cache_by_expiry ON summary_cache (expires_ms);
   CREATE TABLE health (id INTEGER PRIMARY KEY CHECK (id = 1), checked_ms INTEGER NOT NULL);`,
  // 2: the cold layer, searchable with FTS5 (bm25) through an external-content index kept by triggers.
  `CREATE TABLE memory (
     id INTEGER PRIMARY KEY,
     key_name TEXT NOT NULL,
     session_id TEXT NOT NULL,
     compaction_id TEXT NOT NULL,
     kind TEXT NOT NULL,
     text TEXT NOT NULL,
     msg_from INTEGER NOT NULL,
     msg_to INTEGER NOT NULL,
     created_at TEXT NOT NULL,
     created_ms INTEGER NOT NULL
   );
   CREATE INDEX memory_by_session ON memory (key_name, session_id, id);
   CREATE INDEX memory_by_age ON memory (created_ms);
   CREATE VIRTUAL TABLE memory_fts USING fts5(text, content='memory', content_rowid='id', tokenize='porter unicode61');
   CREATE TRIGGER memory_added AFTER INSERT ON memory BEGIN
     INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
   END;
   CREATE TRIGGER memory_removed AFTER DELETE ON memory BEGIN
     INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
   END;`,
  // 3: a cached summary's and a conversation's anchors' session, so that deleting a session deletes them;
  // a deleted entry's words taken out of the full-text index at once, not left for a later merge.
  `ALTER TABLE summary_cache ADD COLUMN key_name TEXT;
   ALTER TABLE summary_cache ADD COLUMN session_id TEXT;
   CREATE INDEX summary_cache_by_owner ON summary_cache (key_name, session_id) WHERE session_id IS NOT NULL;
   INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1);`,
  // 4: a row while the full-text index holds words of entries the cap took out without secure-delete
  // (they wait for a merge), so that the next session's deletion merges the index.
  `CREATE TABLE memory_evicted (id INTEGER PRIMARY KEY CHECK (id = 1));`
]

/** A tenant's sessions, newest compaction first, each with its count, first time and newest record (the index on key, session, seq serves it). */
const SESSIONS_SQL = `SELECT g.session_id, g.n, g.first_ms, g.last_seq, c.record
  FROM (SELECT session_id, COUNT(*) AS n, MIN(created_ms) AS first_ms, MAX(seq) AS last_seq
          FROM compactions WHERE key_name = ? AND session_id IS NOT NULL GROUP BY session_id) g
  JOIN compactions c ON c.seq = g.last_seq
  WHERE g.last_seq < ? ORDER BY g.last_seq DESC LIMIT ?`

/** A free-text query as an FTS5 expression: each word quoted, any of them. */
export function ftsQuery(text: string): string | undefined {
  const words = queryWords(text)
  return words.length === 0 ? undefined : words.map((w) => `"${w}"`).join(' OR ')
}

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
  db.pragma('busy_timeout = 5000')
  return db
}

/**
 * A session's deletion merges the full-text index where it holds at least a twentieth of the entries: a
 * secure delete of an entry cost about what merging twenty entries of the index does (12,000 entries of
 * 96,000: 1.35 s one by one, 0.47 s deleted and merged, in a scratch script).
 */
const MERGE_OVER_ENTRIES = 20

/**
 * The store's writes on one connection, run where that connection lives: in the writer thread for a file
 * (sqlite-writer.ts), in the calling thread for `:memory:` (no second connection can see it).
 */
export class SqliteWrites {
  private readonly statements

  constructor(
    private readonly db: Database.Database,
    /** Most cold-layer entries kept a session (the oldest go first). */
    private readonly maxSessionMemory = MAX_SESSION_MEMORY
  ) {
    this.statements = {
      insert: db.prepare('INSERT INTO compactions (id, session_id, key_name, created_at, created_ms, record) VALUES (@id, @session_id, @key_name, @created_at, @created_ms, @record)'),
      putCache: db.prepare(
        'INSERT INTO summary_cache (key, value, expires_ms, key_name, session_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms, key_name = excluded.key_name, session_id = excluded.session_id'
      ),
      ownedKeys: db.prepare('SELECT key FROM summary_cache WHERE key_name = ? AND session_id = ?'),
      deleteRecords: db.prepare('DELETE FROM compactions WHERE key_name = ? AND session_id = ?'),
      deleteMemory: db.prepare('DELETE FROM memory WHERE key_name = ? AND session_id = ?'),
      deleteCache: db.prepare('DELETE FROM summary_cache WHERE key_name = ? AND session_id = ?'),
      pruneRecords: db.prepare('DELETE FROM compactions WHERE created_ms < ?'),
      pruneCache: db.prepare('DELETE FROM summary_cache WHERE expires_ms <= ?'),
      health: db.prepare('INSERT INTO health (id, checked_ms) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET checked_ms = excluded.checked_ms'),
      insertMemory: db.prepare(
        'INSERT INTO memory (key_name, session_id, compaction_id, kind, text, msg_from, msg_to, created_at, created_ms) VALUES (@key_name, @session_id, @compaction_id, @kind, @text, @from, @to, @created_at, @created_ms)'
      ),
      capFrom: db.prepare('SELECT id FROM memory WHERE key_name = ? AND session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?').pluck(),
      capMemory: db.prepare('DELETE FROM memory WHERE key_name = ? AND session_id = ? AND id <= ?'),
      secureDeleteOff: db.prepare("INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 0)"),
      secureDeleteOn: db.prepare("INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1)"),
      markEvicted: db.prepare('INSERT OR IGNORE INTO memory_evicted (id) VALUES (1)'),
      anyEvicted: db.prepare('SELECT 1 FROM memory_evicted LIMIT 1').pluck(),
      sessionEntries: db.prepare('SELECT COUNT(*) FROM memory WHERE key_name = ? AND session_id = ?').pluck(),
      allEntries: db.prepare('SELECT COUNT(*) FROM memory').pluck(),
      mergeIndex: db.prepare("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')"),
      clearEvicted: db.prepare('DELETE FROM memory_evicted'),
      pruneMemory: db.prepare('DELETE FROM memory WHERE created_ms < ?')
    }
  }

  /** A record whose summary is its text alone (the sections parse back out of the text), as its JSON. */
  saveRecord(row: RecordRow): void {
    this.statements.insert.run({ ...row, created_ms: Date.parse(row.created_at) })
  }

  putCached(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): void {
    this.statements.putCache.run(key, JSON.stringify(value), expiresAtMs, owner?.key_name ?? null, owner?.session_id ?? null)
  }

  /**
   * Deletes a tenant's session in one transaction (secure_delete zeroes what the rows took), then gives
   * the freed pages back (where the file was made for it) and empties the WAL, which still held them.
   */
  deleteSession(sessionId: string, keyName: string): DeletedSession {
    const deleted = this.db.transaction(() => {
      const keys = (this.statements.ownedKeys.all(keyName, sessionId) as { key: string }[]).map((r) => r.key)
      // Each entry's words go from the index at once (secure-delete), or, where that costs more, the
      // session's entries go without it and one merge rewrites the index without any deleted entry's words,
      // its old pages zeroed as they are freed: where the cap has evicted entries (their words still sit in
      // older segments, and the index is the more fragmented for it), or where the session holds a large
      // share of the index (a secure delete costs about as much an entry as a merge does for twenty).
      const merge =
        this.statements.anyEvicted.get() !== undefined ||
        (this.statements.sessionEntries.get(keyName, sessionId) as number) * MERGE_OVER_ENTRIES >= (this.statements.allEntries.get() as number)
      const rows = (): Omit<DeletedSession, 'space_reclaimed'> => ({
        compactions: this.statements.deleteRecords.run(keyName, sessionId).changes,
        cold_layer: this.statements.deleteMemory.run(keyName, sessionId).changes,
        cached: this.statements.deleteCache.run(keyName, sessionId).changes,
        cache_keys: keys
      })
      if (!merge) return rows()
      const counts = this.withoutSecureDelete(rows)
      this.statements.mergeIndex.run()
      this.statements.clearEvicted.run()
      return counts
    })()
    if (deleted.compactions + deleted.cold_layer + deleted.cached === 0) return { ...deleted, space_reclaimed: true }
    this.db.pragma('incremental_vacuum')
    // busy (1) where a reader's snapshot still needs the WAL: then its frames are overwritten by later writes only
    const [checkpoint] = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[]
    const reclaimed = checkpoint?.busy === 0
    return { ...deleted, space_reclaimed: reclaimed, ...(reclaimed ? {} : { reclaim_failure: 'a reader kept the WAL from being emptied' }) }
  }

  saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): void {
    const created_ms = Date.parse(owner.created_at)
    this.db.transaction(() => {
      for (const r of rows) this.statements.insertMemory.run({ ...owner, created_ms, kind: r.kind, text: r.text, from: r.from, to: r.to })
      const capFrom = this.statements.capFrom.get(owner.key_name, owner.session_id, this.maxSessionMemory) as number | undefined
      if (capFrom === undefined) return
      // The oldest entries past the cap go from the index as a later merge drops them: a secure delete
      // rewrote every term's list in place, about a millisecond an entry, and a session at its cap made
      // each of its compactions' writes take a second. It is noted, so that the next deletion merges.
      this.withoutSecureDelete(() => this.statements.capMemory.run(owner.key_name, owner.session_id, capFrom))
      this.statements.markEvicted.run()
    })()
  }

  /** `fn` with the full-text index's deletes left to a merge (its words stay in older segments until then). */
  private withoutSecureDelete<T>(fn: () => T): T {
    this.statements.secureDeleteOff.run()
    try {
      return fn()
    } finally {
      this.statements.secureDeleteOn.run()
    }
  }

  prune(beforeMs: number, nowMs: number): { records: number; cache: number; memory: number } {
    return {
      records: this.statements.pruneRecords.run(beforeMs).changes,
      cache: this.statements.pruneCache.run(nowMs).changes,
      memory: this.statements.pruneMemory.run(beforeMs).changes
    }
  }

  checkWritable(): void {
    this.statements.health.run(Date.now())
  }
}

export interface SqliteStoreOptions {
  /**
   * Where writes run: `thread`, a writer thread with a connection of its own (the default for a file: a
   * cold layer's indexing takes 10-45 ms, which the event loop no longer waits for), or `inline`, on this
   * thread's connection (the only choice for `:memory:`).
   */
  writer?: 'thread' | 'inline'
  /** Most cold-layer entries kept a session (MAX_SESSION_MEMORY). */
  maxSessionMemory?: number
}

/** SQLite through better-sqlite3, in WAL mode: reads on this thread's connection, writes where `writer` says. */
export class SqliteStore implements Store {
  private readonly db: Database.Database
  private readonly statements
  private readonly writer: SqliteWriter

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
    this.statements = {
      page: this.db.prepare('SELECT seq, record FROM compactions WHERE key_name = ? AND session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?'),
      getCache: this.db.prepare('SELECT value FROM summary_cache WHERE key = ? AND expires_ms > ?'),
      latest: this.db.prepare('SELECT record FROM compactions WHERE key_name = ? AND session_id = ? ORDER BY seq DESC LIMIT 1'),
      countRecords: this.db.prepare('SELECT COUNT(*) AS n FROM compactions WHERE key_name = ? AND session_id = ?'),
      sessions: this.db.prepare(SESSIONS_SQL),
      record: this.db.prepare('SELECT record FROM compactions WHERE key_name = ? AND session_id = ? AND id = ?'),
      timeline: this.db.prepare(
        `SELECT id, created_at, json_extract(record, '$.stats.raw_history_tokens') AS raw, json_extract(record, '$.stats.context_after_compaction') AS after,
           json_extract(record, '$.budget_tokens') AS budget
           FROM compactions WHERE key_name = ? AND session_id = ? ORDER BY seq DESC LIMIT ?`
      ),
      memoryKinds: this.db.prepare('SELECT kind, COUNT(*) AS n FROM memory WHERE key_name = ? AND session_id = ? AND compaction_id = ? GROUP BY kind')
    }
    const inline = path === ':memory:' || options.writer === 'inline'
    if (path !== ':memory:') {
      const fd = this.replayJournal(`${path}-records.journal`)
      this.journalFd = fd
      this.journal = (record) => this.append(fd, record)
    }
    this.writer = inline ? inlineWriter(new SqliteWrites(this.db, options.maxSessionMemory)) : new WriterThread(path, options.maxSessionMemory)
  }

  /** The journal's file, open for appending; undefined for `:memory:`. */
  private readonly journalFd: number | undefined
  /** Records journaled and not yet written; once none are, the journal is emptied. */
  private readonly unwritten = new Set<string>()
  private journaledBytes = 0

  /**
   * Writes the records a journal holds that the file does not (those of compactions answered before the
   * last process stopped, however it stopped), empties it, and returns it open for appending. Runs before
   * the writer thread starts: this connection is the only writer then.
   */
  private replayJournal(file: string): number {
    const fd = openSync(file, 'a+')
    const writes = new SqliteWrites(this.db)
    const known = this.db.prepare('SELECT 1 FROM compactions WHERE id = ?')
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
  readonly journal?: (record: CompactionRecord) => void

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
        this.db.exec(at(MIGRATIONS, v))
        this.db.pragma(`user_version = ${v + 1}`)
      })()
    }
  }

  async saveRecord(record: CompactionRecord): Promise<void> {
    try {
      // a string crosses to the writer thread as one copy, where the record's objects were cloned one by one
      await this.writer.run('saveRecord', [recordRow(record, this.serialized.get(record) ?? JSON.stringify(stored(record)))])
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
    const rows = this.statements.page.all(keyName, sessionId, before, options.limit + 1) as { seq: number; record: string }[]
    const page = rows.slice(0, options.limit)
    return {
      records: page.map((r) => withSections(JSON.parse(r.record) as StoredRecord)),
      next_cursor: rows.length > options.limit ? encodeCursor(at(page, page.length - 1).seq) : null
    }
  }

  async listSessions(keyName: string, options: { limit: number; cursor?: string }): Promise<SessionPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const rows = this.statements.sessions.all(keyName, before, options.limit + 1) as (Omit<SessionRow, 'record'> & { record: string })[]
    const page = rows.slice(0, options.limit)
    return {
      sessions: page.map((r) => sessionSummary({ ...r, record: JSON.parse(r.record) as SessionRow['record'] })),
      next_cursor: rows.length > options.limit ? encodeCursor(at(page, page.length - 1).last_seq) : null
    }
  }

  async getCached(key: string, nowMs: number): Promise<CachedSummary | undefined> {
    const row = this.statements.getCache.get(key, nowMs) as { value: string } | undefined
    return row ? (JSON.parse(row.value) as CachedSummary) : undefined
  }

  async putCached(key: string, value: CachedSummary, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.writer.run('putCached', [key, value, expiresAtMs, owner])
  }

  async getState(key: string, nowMs: number): Promise<unknown> {
    const row = this.statements.getCache.get(key, nowMs) as { value: string } | undefined
    return row ? (JSON.parse(row.value) as unknown) : undefined
  }

  async putState(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.writer.run('putCached', [key, value, expiresAtMs, owner])
  }

  /** Deleted by the writer (after every write asked for before it), and taken out of the records' journal too. */
  async deleteSession(sessionId: string, keyName: string): Promise<DeletedSession> {
    const deleted = await this.writer.run('deleteSession', [sessionId, keyName])
    if (this.journalFd !== undefined) this.rewriteJournal(this.journalFd, `${this.path}-records.journal`, (r) => r.key_name === keyName && r.session_id === sessionId)
    return deleted
  }

  /** The journal without the records `drop` picks (in this thread, where appends are made: none comes between). */
  private rewriteJournal(fd: number, file: string, drop: (record: StoredRecord) => boolean): void {
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
    ftruncateSync(fd, 0)
    const text = kept.map((line) => `${line}\n`).join('')
    if (text !== '') writeSync(fd, text)
    this.journaledBytes = Buffer.byteLength(text)
  }

  async saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<void> {
    if (rows.length === 0) return
    await this.writer.run('saveMemory', [owner, rows])
  }

  async recall(sessionId: string, keyName: string, query: RecallQuery): Promise<RecallHit[]> {
    const match = ftsQuery(query.text)
    if (!match) return []
    const kinds = query.kinds && query.kinds.length > 0 ? query.kinds : undefined
    // bm25 is negative, lower is better. The user's own requests and the reasons of failures are what a
    // search is most often for, so they weigh a little more than the agent's prose; among equals, newest first.
    const sql = `SELECT m.kind, m.text, m.compaction_id, m.msg_from, m.msg_to, m.created_at,
         bm25(memory_fts) * CASE m.kind ${Object.entries(KIND_WEIGHT).map(([kind, w]) => `WHEN '${kind}' THEN ${w}`).join(' ')} ELSE 1.0 END AS rank
       FROM memory_fts JOIN memory m ON m.id = memory_fts.rowid
       WHERE memory_fts MATCH ? AND m.key_name = ? AND m.session_id = ?${kinds ? ` AND m.kind IN (${kinds.map(() => '?').join(', ')})` : ''}
       ORDER BY rank, m.id DESC LIMIT ?`
    const rows = this.db.prepare(sql).all(match, keyName, sessionId, ...(kinds ?? []), query.limit) as {
      kind: string
      text: string
      compaction_id: string
      msg_from: number
      msg_to: number
      created_at: string
      rank: number
    }[]
    return rows.map((r) => ({
      kind: r.kind,
      text: r.text,
      compaction_id: r.compaction_id,
      messages: [r.msg_from, r.msg_to],
      score: Number((-r.rank).toFixed(4)),
      created_at: r.created_at
    }))
  }

  async compaction(sessionId: string, keyName: string, compactionId: string): Promise<CompactionDetail | undefined> {
    const row = this.statements.record.get(keyName, sessionId, compactionId) as { record: string } | undefined
    if (!row) return undefined
    const kinds = this.statements.memoryKinds.all(keyName, sessionId, compactionId) as { kind: string; n: number }[]
    return { record: withSections(JSON.parse(row.record) as StoredRecord), memory: Object.fromEntries(kinds.map((k) => [k.kind, k.n])) }
  }

  async timeline(sessionId: string, keyName: string, limit: number): Promise<TimelinePoint[]> {
    const rows = this.statements.timeline.all(keyName, sessionId, limit) as { id: string; created_at: string; raw: number; after: number; budget: number | null }[]
    return rows.reverse().map((r) => ({ compaction_id: r.id, created_at: r.created_at, raw_history_tokens: r.raw, context_after_compaction: r.after, budget_tokens: r.budget ?? null }))
  }

  async recap(sessionId: string, keyName: string): Promise<Recap | undefined> {
    const row = this.statements.latest.get(keyName, sessionId) as { record: string } | undefined
    if (!row) return undefined
    const { n } = this.statements.countRecords.get(keyName, sessionId) as { n: number }
    return { record: withSections(JSON.parse(row.record) as StoredRecord), compactions: n }
  }

  async prune(beforeMs: number, nowMs: number): Promise<{ records: number; cache: number; memory: number }> {
    return this.writer.run('prune', [beforeMs, nowMs])
  }

  async checkWritable(): Promise<void> {
    await this.writer.run('checkWritable', [])
  }

  room(): Promise<void> {
    return this.writer.room()
  }

  /** This thread's connection (reads; writes too when inline), for tests that must make the disk misbehave. */
  get connection(): Database.Database {
    return this.db
  }

  /** Closes after every write asked for so far is done. */
  async close(): Promise<void> {
    await this.writer.close()
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
}

function recordRow(record: Pick<StoredRecord, 'id' | 'session_id' | 'key_name' | 'created_at'>, json: string): RecordRow {
  return { id: record.id, session_id: record.session_id, key_name: record.key_name, created_at: record.created_at, record: json }
}

/** The journal is emptied once nothing in it is unwritten and it has grown past this. */
const JOURNAL_KEEP_BYTES = 1 << 20
