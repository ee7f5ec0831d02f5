import type Database from 'better-sqlite3'
import { Terms, compactionOwner, ownerOf, seal } from './sealing.js'
import { KeyRing } from './keyring.js'

/**
 * The SQLite store's schema migrations, versioned in code: migration N brings `user_version` from N-1 to
 * N. Append only; never edit one that has shipped. A migration is SQL, or a function where rows must be
 * rewritten (each runs in one transaction).
 */
export const MIGRATIONS: readonly (string | ((db: Database.Database) => void))[] = [
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
  // 3: a cached summary's and a conversation's anchors' session, so that deleting a session deletes them.
  `ALTER TABLE summary_cache ADD COLUMN key_name TEXT;
   ALTER TABLE summary_cache ADD COLUMN session_id TEXT;
   CREATE INDEX summary_cache_by_owner ON summary_cache (key_name, session_id) WHERE session_id IS NOT NULL;
   INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1);`,
  // 4: a row while the full-text index holds words of entries the cap took out without secure-delete.
  `CREATE TABLE memory_evicted (id INTEGER PRIMARY KEY CHECK (id = 1));`,
  // 5: every session sealed under a key of its own (sealing.ts); its rows named by owner; the cold layer's
  // index holds the session's terms; a row a session for its list. The rows of 1-4 are moved over.
  sealSessions,
  // 6: what the gateway did for a tenant, tallied by the hour (the overview; a session's cost). A row holds
  // a number, never a text of a session: `scope` is '' for the tenant's total, else a session's owner.
  `CREATE TABLE activity (
     key_name TEXT NOT NULL,
     scope TEXT NOT NULL,
     hour_ms INTEGER NOT NULL,
     name TEXT NOT NULL,
     value REAL NOT NULL,
     PRIMARY KEY (key_name, scope, hour_ms, name)
   ) WITHOUT ROWID;
   CREATE INDEX activity_by_age ON activity (hour_ms);`,
  // 7: the cold layer keeps whole texts: a passage's lines, its size in words (a recall's bm25 takes its
  // session's own figures) and in bytes (a session's bound); a covering index that gives a session's
  // figures without reading its rows; the index's instances, for the terms' frequencies in each entry.
  `ALTER TABLE cold ADD COLUMN line_from INTEGER;
   ALTER TABLE cold ADD COLUMN line_to INTEGER;
   ALTER TABLE cold ADD COLUMN words INTEGER;
   ALTER TABLE cold ADD COLUMN bytes INTEGER;
   CREATE INDEX cold_sizes ON cold (owner, id, kind, words, bytes);
   CREATE VIRTUAL TABLE cold_vocab USING fts5vocab(cold_terms, instance);`,
  // 8: compactions made without a session, kept in clear until now, sealed under a key of their own.
  sealSessionless,
  // 9: a deletion is final: a tombstone a session (or a session-less compaction) keeps for a day, which every
  // write of it checks inside its transaction (work begun before the deletion writes nothing after it).
  `CREATE TABLE tombstones (owner TEXT PRIMARY KEY, deleted_ms INTEGER NOT NULL) WITHOUT ROWID;`
]

/** The tables of the sealed schema (migration 5). */
const SEALED_SCHEMA = `
  CREATE TABLE session_keys (owner TEXT PRIMARY KEY, key BLOB NOT NULL) WITHOUT ROWID;
  CREATE TABLE sessions (
    owner TEXT PRIMARY KEY,
    key_name TEXT NOT NULL,
    session BLOB NOT NULL,
    n INTEGER NOT NULL,
    first_ms INTEGER NOT NULL,
    last_seq INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX sessions_by_tenant ON sessions (key_name, last_seq);
  CREATE TABLE records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    owner TEXT,
    key_name TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    raw INTEGER NOT NULL,
    after INTEGER NOT NULL,
    budget INTEGER,
    body BLOB NOT NULL
  );
  CREATE INDEX records_by_owner ON records (owner, seq) WHERE owner IS NOT NULL;
  CREATE INDEX records_by_age ON records (created_ms);
  CREATE TABLE cold (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    compaction_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    body BLOB NOT NULL,
    msg_from INTEGER NOT NULL,
    msg_to INTEGER NOT NULL,
    created_ms INTEGER NOT NULL
  );
  CREATE INDEX cold_by_owner ON cold (owner, id);
  CREATE INDEX cold_by_compaction ON cold (owner, compaction_id);
  CREATE INDEX cold_by_age ON cold (created_ms);
  CREATE VIRTUAL TABLE cold_terms USING fts5(terms, content='', contentless_delete=1, tokenize='ascii');
  -- a deleted entry's terms stay as a tombstone until a merge of new entries takes them: merging a segment
  -- for its tombstones alone held the writer 100-190 ms in a prune (and they are keyed hashes of a key gone)
  INSERT INTO cold_terms (cold_terms, rank) VALUES ('deletemerge', 0);
  CREATE TABLE cache (key TEXT PRIMARY KEY, owner TEXT, value BLOB NOT NULL, expires_ms INTEGER NOT NULL);
  CREATE INDEX cache_by_expiry ON cache (expires_ms);
  CREATE INDEX cache_by_owner ON cache (owner) WHERE owner IS NOT NULL;`

/** A session's key, made the first time one of its rows is written. */
export function sessionKey(db: Database.Database, owner: string, ring: KeyRing = PLAIN_RING): Buffer {
  db.prepare('INSERT OR IGNORE INTO session_keys (owner, key) VALUES (?, ?)').run(owner, ring.fresh(owner))
  return ring.open(owner, db.prepare('SELECT key FROM session_keys WHERE owner = ?').pluck().get(owner) as Buffer)
}

/** The ring of a store given no master key (the migrations' too: they run before any key is wrapped). */
const PLAIN_RING = new KeyRing()

/** The numbers of a record a list and a chart read without opening it. */
export function recordFigures(json: string): { raw: number; after: number; budget: number | null } {
  const record = JSON.parse(json) as { stats: { raw_history_tokens: number; context_after_compaction: number }; budget_tokens?: number | null }
  return { raw: record.stats.raw_history_tokens, after: record.stats.context_after_compaction, budget: record.budget_tokens ?? null }
}

/** Migration 5: the rows of the clear schema moved, sealed, into the sealed one; the old tables dropped, their pages zeroed. */
function sealSessions(db: Database.Database): void {
  db.exec(SEALED_SCHEMA)
  const keys = new Map<string, { key: Buffer; terms: Terms }>()
  const keyOf = (keyName: string, sessionId: string): { owner: string; key: Buffer; terms: Terms } => {
    const owner = ownerOf(keyName, sessionId)
    let known = keys.get(owner)
    if (!known) {
      const key = sessionKey(db, owner)
      known = { key, terms: new Terms(key) }
      keys.set(owner, known)
    }
    return { owner, ...known }
  }
  const insertRecord = db.prepare('INSERT INTO records (seq, id, owner, key_name, created_ms, raw, after, budget, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
  const upsertSession = db.prepare(
    `INSERT INTO sessions (owner, key_name, session, n, first_ms, last_seq) VALUES (?, ?, ?, 1, ?, ?)
       ON CONFLICT (owner) DO UPDATE SET n = n + 1, first_ms = min(first_ms, excluded.first_ms), last_seq = max(last_seq, excluded.last_seq)`
  )
  for (const r of batches(
    db,
    'SELECT seq AS at, seq, id, session_id, key_name, created_ms, record FROM compactions WHERE seq > ? ORDER BY seq LIMIT ?'
  ) as Iterable<{
    seq: number
    id: string
    session_id: string | null
    key_name: string
    created_ms: number
    record: string
  }>) {
    const { raw, after, budget } = recordFigures(r.record)
    if (r.session_id === null) {
      insertRecord.run(r.seq, r.id, null, r.key_name, r.created_ms, raw, after, budget, Buffer.from(r.record))
      continue
    }
    const { owner, key } = keyOf(r.key_name, r.session_id)
    insertRecord.run(r.seq, r.id, owner, r.key_name, r.created_ms, raw, after, budget, seal(key, r.record))
    upsertSession.run(owner, r.key_name, seal(key, r.session_id), r.created_ms, r.seq)
  }
  const insertCold = db.prepare('INSERT INTO cold (id, owner, compaction_id, kind, body, msg_from, msg_to, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
  const insertTerms = db.prepare('INSERT INTO cold_terms (rowid, terms) VALUES (?, ?)')
  for (const m of batches(
    db,
    'SELECT id AS at, id, key_name, session_id, compaction_id, kind, text, msg_from, msg_to, created_ms FROM memory WHERE id > ? ORDER BY id LIMIT ?'
  ) as Iterable<{
    id: number
    key_name: string
    session_id: string
    compaction_id: string
    kind: string
    text: string
    msg_from: number
    msg_to: number
    created_ms: number
  }>) {
    const { owner, key, terms } = keyOf(m.key_name, m.session_id)
    insertCold.run(m.id, owner, m.compaction_id, m.kind, seal(key, m.text), m.msg_from, m.msg_to, m.created_ms)
    insertTerms.run(m.id, terms.of(m.text))
  }
  const insertCache = db.prepare('INSERT INTO cache (key, owner, value, expires_ms) VALUES (?, ?, ?, ?)')
  for (const c of batches(
    db,
    'SELECT rowid AS at, key, value, expires_ms, key_name, session_id FROM summary_cache WHERE rowid > ? ORDER BY rowid LIMIT ?'
  ) as Iterable<{
    key: string
    value: string
    expires_ms: number
    key_name: string | null
    session_id: string | null
  }>) {
    if (c.session_id === null) {
      insertCache.run(c.key, null, Buffer.from(c.value), c.expires_ms)
      continue
    }
    const { owner, key } = keyOf(c.key_name ?? '', c.session_id)
    insertCache.run(c.key, owner, seal(key, c.value), c.expires_ms)
  }
  db.exec(`DROP TABLE memory_fts; DROP TABLE memory; DROP TABLE memory_evicted; DROP TABLE compactions; DROP TABLE summary_cache;`)
}

/** Migration 8: each record without a session sealed under its compaction's own key (compactionOwner). */
function sealSessionless(db: Database.Database): void {
  const update = db.prepare('UPDATE records SET owner = ?, body = ? WHERE seq = ?')
  for (const r of batches(db, 'SELECT seq AS at, seq, id, key_name, body FROM records WHERE owner IS NULL AND seq > ? ORDER BY seq LIMIT ?') as Iterable<{
    seq: number
    id: string
    key_name: string
    body: Buffer
  }>) {
    const owner = compactionOwner(r.key_name, r.id)
    update.run(owner, seal(sessionKey(db, owner), r.body.toString('utf8')), r.seq)
  }
}

/** The rows a keyset query gives (`at` its key, `?` the last key, then the batch's size), a batch at a time: rows are written between (a connection cannot write while it iterates). */
function* batches(db: Database.Database, sql: string): Generator<unknown> {
  const statement = db.prepare(sql)
  for (let after = 0; ;) {
    const rows = statement.all(after, 2_000) as { at: number }[]
    yield* rows
    if (rows.length < 2_000) return
    after = rows[rows.length - 1]?.at ?? after
  }
}
