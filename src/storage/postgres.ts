import pg from 'pg'
import type {
  ActivityRow,
  ActivityTally,
  CachedSummary,
  CompactionRecord,
  DeletedSession,
  EntryPage,
  MemoryOwner,
  SessionOwner,
  MemoryRow,
  Recap,
  RecallHit,
  RecallQuery,
  RecordPage,
  SessionPage,
  Store,
  CompactionDetail
} from './store.js'
import type { TimelinePoint } from '../contract/schemas.js'
import { type ColdSaved, StoreError, sessionSummary } from './store.js'
import { Retried, type StoredRecord, TOMBSTONE_MS, activityScope, decodeCursor, encodeCursor, openRecord, recallHit } from './common.js'
import { MAX_SESSION_MEMORY, MAX_SESSION_MEMORY_BYTES } from '../contract/defaults.js'
import { BM25_B, BM25_K1 } from './rank.js'
import { byLines, candidatesFor } from './lines.js'
import { type KeyMaterial, KeyRing } from './keyring.js'
import { at } from '../compaction/index.js'
import { Terms, compactionOwner, newKey, ownerOf, seal, unseal } from './sealing.js'

/**
 * Schema migrations, versioned in code: migration N is recorded in schema_migrations as version N.
 * Append only; never edit one that has shipped. They run at start, in one transaction, under an advisory
 * lock, so that replicas starting together migrate once.
 */
export const MIGRATIONS: readonly (string | ((client: pg.PoolClient) => Promise<void>))[] = [
  `CREATE TABLE compactions (
     seq BIGSERIAL PRIMARY KEY,
     id TEXT NOT NULL UNIQUE,
     session_id TEXT,
     key_name TEXT NOT NULL,
     created_at TEXT NOT NULL,
     created_ms BIGINT NOT NULL,
     record JSONB NOT NULL
   );
   CREATE INDEX compactions_by_session ON compactions (key_name, session_id, seq);
   CREATE INDEX compactions_by_age ON compactions (created_ms);
   CREATE TABLE summary_cache (key TEXT PRIMARY KEY, value JSONB NOT NULL, expires_ms BIGINT NOT NULL);
   CREATE INDEX summary_cache_by_expiry ON summary_cache (expires_ms);
   CREATE TABLE health (id INT PRIMARY KEY CHECK (id = 1), checked_ms BIGINT NOT NULL);
   CREATE TABLE memory (
     id BIGSERIAL PRIMARY KEY,
     key_name TEXT NOT NULL,
     session_id TEXT NOT NULL,
     compaction_id TEXT NOT NULL,
     kind TEXT NOT NULL,
     text TEXT NOT NULL,
     msg_from INT NOT NULL,
     msg_to INT NOT NULL,
     created_at TEXT NOT NULL,
     created_ms BIGINT NOT NULL,
     search TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
   );
   CREATE INDEX memory_by_session ON memory (key_name, session_id, id);
   CREATE INDEX memory_by_age ON memory (created_ms);
   CREATE INDEX memory_search ON memory USING GIN (search);`,
  // 2: a cached summary's and a conversation's anchors' session, so that deleting a session deletes them.
  `ALTER TABLE summary_cache ADD COLUMN key_name TEXT, ADD COLUMN session_id TEXT;
   CREATE INDEX summary_cache_by_owner ON summary_cache (key_name, session_id) WHERE session_id IS NOT NULL;`,
  // 3: every session sealed under a key of its own (sealing.ts); its rows named by owner; the cold layer's
  // index holds the session's terms; a row a session for its list. The rows of 1-2 are moved over.
  sealSessions,
  // 4: what the gateway did for a tenant, tallied by the hour (the overview; a session's cost). A row holds
  // a number, never a text of a session: `scope` is '' for the tenant's total, else a session's owner.
  `CREATE TABLE activity (
     key_name TEXT NOT NULL,
     scope TEXT NOT NULL,
     hour_ms BIGINT NOT NULL,
     name TEXT NOT NULL,
     value DOUBLE PRECISION NOT NULL,
     PRIMARY KEY (key_name, scope, hour_ms, name)
   );
   CREATE INDEX activity_by_age ON activity (hour_ms);`,
  // 5: the cold layer keeps whole texts: a passage's lines, its size in words (a recall's bm25 takes its
  // session's own figures) and in bytes (a session's bound), and an index that gives a session's figures
  // without reading its rows.
  `ALTER TABLE cold ADD COLUMN line_from INT, ADD COLUMN line_to INT, ADD COLUMN words INT, ADD COLUMN bytes INT;
   CREATE INDEX cold_sizes ON cold (owner, id) INCLUDE (words, bytes);`,
  // 6: compactions made without a session, kept in clear until now, sealed under a key of their own.
  sealSessionless,
  // 7: a deletion is final: a tombstone a session (or a session-less compaction) keeps for a day, which every
  // write of it checks inside its transaction, under a lock the deletion takes alone (writes share it).
  `CREATE TABLE tombstones (owner text PRIMARY KEY, deleted_ms bigint NOT NULL);`
]

export const PG_SCHEMA_VERSION = MIGRATIONS.length
/** How long a deletion's table rewrite may take before the deletion says its space was not reclaimed. */
const VACUUM_TIMEOUT_MS = 60_000
/** Most rows a slice of a deletion or a prune takes: each slice a statement of its own, its locks held briefly. */
export const PG_SLICE_ROWS = 1_000
/** The advisory lock key under which migrations run (any fixed number the deployment does not use elsewhere). */
const MIGRATION_LOCK = 7_318_204_551
/** The advisory lock key under which a day's table of the cold layer is made. */
const PARTITION_LOCK = 7_318_204_552

/** The URL as pg takes it, and the schema named by its `schema` parameter (public by default). */
export function parsePostgresUrl(url: string): { connectionString: string; schema: string } {
  const parsed = new URL(url)
  const schema = parsed.searchParams.get('schema') ?? 'public'
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new StoreError(`COMPACT_DB: schema "${schema}" must be lower-case letters, digits and _`)
  parsed.searchParams.delete('schema')
  return { connectionString: parsed.toString(), schema }
}

/** The same URL with its password hidden, for logs and errors. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return 'postgres://…'
  }
}

/** How often a deletion's key-table rewrite that failed is tried again. */
const RECLAIM_RETRY_MS = 5_000

export interface PostgresOptions {
  /** Connections in the pool at most. */
  maxConnections?: number
  /** Most cold-layer entries kept a session (MAX_SESSION_MEMORY). */
  maxSessionMemory?: number
  /** Most bytes of text a session's cold layer keeps (MAX_SESSION_MEMORY_BYTES). */
  maxSessionBytes?: number
  /** Told when an idle connection fails (the server went away); the pool makes new ones when it is back. */
  onPoolError?: (err: Error) => void
  /** The master keys its session keys are wrapped under (none: kept as they are). */
  keys?: KeyMaterial
}

/**
 * PostgreSQL through a pg pool: several replicas share records, the summary cache and the cold layer
 * (full-text search over a generated tsvector). A database that is down fails each operation quickly
 * (callers lose the record or skip the cache, never the compaction); the pool reconnects on its own.
 */
export class PostgresStore implements Store {
  readonly shared = true
  private readonly pool: pg.Pool
  private readonly schema: string
  private readonly onPoolError: ((err: Error) => void) | undefined
  private readonly maxSessionMemory: number
  private readonly maxSessionBytes: number
  /** How its session keys are wrapped and opened. */
  readonly ring: KeyRing
  private migrated: Promise<void> | undefined
  private closed = false

  constructor(
    readonly url: string,
    options: PostgresOptions = {}
  ) {
    const { connectionString, schema } = parsePostgresUrl(url)
    this.schema = schema
    this.pool = new pg.Pool({
      connectionString,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      query_timeout: 10_000,
      options: `-c search_path=${schema}`,
      application_name: 'compaction-gateway'
    })
    this.onPoolError = options.onPoolError
    this.maxSessionMemory = options.maxSessionMemory ?? MAX_SESSION_MEMORY
    this.maxSessionBytes = options.maxSessionBytes ?? MAX_SESSION_MEMORY_BYTES
    this.ring = new KeyRing(options.keys)
    this.pool.on('error', (err) => options.onPoolError?.(err))
  }

  /** Runs the migrations (once; again after a failure). Every operation waits for them. */
  migrate(): Promise<void> {
    this.migrated ??= this.runMigrations().catch((err: unknown) => {
      this.migrated = undefined
      throw err instanceof StoreError
        ? err
        : new StoreError(`cannot migrate ${redactedUrl(this.url)}: ${err instanceof Error ? err.message : String(err)}`, { cause: err })
    })
    return this.migrated
  }

  private async runMigrations(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.schema}`)
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
      const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations')
      const current = rows[0]?.v ?? 0
      if (current > MIGRATIONS.length) throw new StoreError(`schema version ${current} is newer than this build knows (${MIGRATIONS.length})`)
      for (let v = current; v < MIGRATIONS.length; v++) {
        const migration = at(MIGRATIONS, v)
        if (typeof migration === 'string') await client.query(migration)
        else await migration(client)
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [v + 1])
      }
    })
  }

  /** Runs `work` in one transaction on one connection: committed when it returns, rolled back when it throws. */
  private async transaction<T = void>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect()
    // A checked-out client is the pool's no longer: a connection reset while it is out is emitted on the
    // client, and an 'error' event nobody listens to ends the process. Heard here, it fails the work and
    // the broken connection is destroyed, not given back.
    let broken: Error | undefined
    const onError = (err: Error): void => {
      broken = err
      this.onPoolError?.(err)
    }
    client.on('error', onError)
    try {
      await client.query('BEGIN')
      const done = await work(client)
      await client.query('COMMIT')
      return done
    } catch (err) {
      if (!broken) await client.query('ROLLBACK').catch(() => undefined)
      throw err
    } finally {
      client.off('error', onError)
      client.release(broken ?? false)
    }
  }

  private async query<R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    if (this.closed) throw new StoreError('the store is closed')
    await this.migrate()
    return this.pool.query<R>(sql, values)
  }

  /** The session's key, made the first time one of its rows is written (by whichever replica is first). */
  private async sessionKey(client: pg.PoolClient | pg.Pool, owner: string): Promise<Buffer> {
    for (;;) {
      await client.query('INSERT INTO session_keys (owner, key) VALUES ($1, $2) ON CONFLICT (owner) DO NOTHING', [owner, this.ring.fresh(owner)])
      const { rows } = await client.query<{ key: Buffer }>('SELECT key FROM session_keys WHERE owner = $1', [owner])
      // (none only where another replica deleted the session in between: a new key, then)
      if (rows[0]) return this.ring.open(owner, rows[0].key)
    }
  }

  /**
   * Whether a write of `owner` begun at `since` may go on: inside its transaction, under the owner's lock
   * shared with other writes and taken alone by a deletion (so a deletion waits for the writes under way and
   * they for it), the owner not deleted at or after `since`.
   */
  private async admitted(client: pg.PoolClient, owner: string, since: number): Promise<boolean> {
    await client.query('SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))', [owner])
    const { rows } = await client.query<{ deleted_ms: string }>('SELECT deleted_ms FROM tombstones WHERE owner = $1', [owner])
    return rows[0] === undefined || Number(rows[0].deleted_ms) < since
  }

  /** The owner deleted now: its lock taken alone (the writes under way finish first), its tombstone laid. */
  private async bury(client: pg.PoolClient, owner: string): Promise<void> {
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [owner])
    await client.query(
      'INSERT INTO tombstones (owner, deleted_ms) VALUES ($1, $2) ON CONFLICT (owner) DO UPDATE SET deleted_ms = greatest(tombstones.deleted_ms, excluded.deleted_ms)',
      [owner, Date.now()]
    )
  }

  /** The session's owner and key; undefined for a session the tenant has nothing of. */
  private async session(sessionId: string, keyName: string): Promise<{ owner: string; key: Buffer } | undefined> {
    const owner = ownerOf(keyName, sessionId)
    const { rows } = await this.query<{ key: Buffer }>('SELECT key FROM session_keys WHERE owner = $1', [owner])
    return rows[0] ? { owner, key: this.ring.open(owner, rows[0].key) } : undefined
  }

  /** A record, sealed under its session's key (a record without a session is kept as it is: no deletion names it). */
  async saveRecord(record: CompactionRecord, since?: number): Promise<void> {
    const json = JSON.stringify({ ...record, summary: { text: record.summary.text } })
    const createdMs = Date.parse(record.created_at)
    const begun = since ?? createdMs
    const figures = [record.stats.raw_history_tokens, record.stats.context_after_compaction, record.budget_tokens ?? null]
    const insert = 'INSERT INTO records (id, owner, key_name, created_ms, raw, after, budget, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq'
    const sessionId = record.session_id
    if (sessionId === null) {
      // a compaction without a session: sealed under a key of its own, deleted with it by its id
      const owner = compactionOwner(record.key_name, record.id)
      await this.migrate()
      await this.transaction(async (client) => {
        if (!(await this.admitted(client, owner, begun))) return
        const key = await this.sessionKey(client, owner)
        await client.query(insert, [record.id, owner, record.key_name, createdMs, ...figures, seal(key, json)])
      })
      return
    }
    const owner = ownerOf(record.key_name, sessionId)
    await this.migrate()
    await this.transaction(async (client) => {
      if (!(await this.admitted(client, owner, begun))) return
      const key = await this.sessionKey(client, owner)
      const { rows } = await client.query<{ seq: string }>(insert, [record.id, owner, record.key_name, createdMs, ...figures, seal(key, json)])
      await client.query(
        `INSERT INTO sessions (owner, key_name, session, n, first_ms, last_seq) VALUES ($1, $2, $3, 1, $4, $5)
           ON CONFLICT (owner) DO UPDATE SET n = sessions.n + 1, first_ms = least(sessions.first_ms, excluded.first_ms), last_seq = greatest(sessions.last_seq, excluded.last_seq)`,
        [owner, record.key_name, seal(key, sessionId), createdMs, rows[0]?.seq]
      )
    })
  }

  async listRecords(sessionId: string, keyName: string, options: { limit: number; cursor?: string }): Promise<RecordPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const s = await this.session(sessionId, keyName)
    if (!s) return { records: [], next_cursor: null }
    const { rows } = await this.query<{ seq: string; body: Buffer }>('SELECT seq, body FROM records WHERE owner = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3', [
      s.owner,
      before,
      options.limit + 1
    ])
    const page = rows.slice(0, options.limit)
    return {
      records: page.map((r) => openRecord(s.key, r.body)),
      next_cursor: rows.length > options.limit ? encodeCursor(Number(at(page, page.length - 1).seq)) : null
    }
  }

  /** A page of the tenant's list rows (one a session, kept up to date by each write), by the index on tenant and newest record. */
  async listSessions(keyName: string, options: { limit: number; cursor?: string }): Promise<SessionPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const { rows } = await this.query<{
      owner: string
      session: Buffer
      n: number
      first_ms: string
      last_seq: string
      key: Buffer | null
      id: string
      created_ms: string
      raw: string
      after: string
    }>(
      // (each key looked up by its owner: a join would read every part of the keys' table)
      `SELECT s.owner, s.session, s.n, s.first_ms, s.last_seq, (SELECT k.key FROM session_keys k WHERE k.owner = s.owner) AS key, r.id, r.created_ms, r.raw, r.after
         FROM sessions s JOIN records r ON r.seq = s.last_seq
        WHERE s.key_name = $1 AND s.last_seq < $2 ORDER BY s.last_seq DESC LIMIT $3`,
      [keyName, before, options.limit + 1]
    )
    const page = rows.slice(0, options.limit)
    return {
      // (a session whose key is gone is being deleted)
      sessions: page.flatMap((r) =>
        r.key
          ? [
              sessionSummary({
                session_id: unseal(this.ring.open(r.owner, r.key), r.session),
                n: Number(r.n),
                first_ms: Number(r.first_ms),
                id: r.id,
                created_ms: Number(r.created_ms),
                raw: Number(r.raw),
                after: Number(r.after)
              })
            ]
          : []
      ),
      next_cursor: rows.length > options.limit ? encodeCursor(Number(at(page, page.length - 1).last_seq)) : null
    }
  }

  async getCached(key: string, nowMs: number): Promise<CachedSummary | undefined> {
    return (await this.getState(key, nowMs)) as CachedSummary | undefined
  }

  async getState(key: string, nowMs: number): Promise<unknown> {
    const { rows } = await this.query<{ value: Buffer; owner: string | null; key: Buffer | null }>(
      'SELECT c.value, c.owner, (SELECT k.key FROM session_keys k WHERE k.owner = c.owner) AS key FROM cache c WHERE c.key = $1 AND c.expires_ms > $2',
      [key, nowMs]
    )
    const row = rows[0]
    if (!row) return undefined
    if (row.owner === null) return JSON.parse(row.value.toString('utf8')) as unknown
    // a row of a session being deleted (its key gone first) reads as none
    return row.key ? (JSON.parse(unseal(this.ring.open(row.owner, row.key), row.value)) as unknown) : undefined
  }

  async firstState(key: string, value: unknown): Promise<unknown> {
    await this.migrate()
    await this.query('INSERT INTO cache (key, owner, value, expires_ms) VALUES ($1, NULL, $2, $3) ON CONFLICT (key) DO NOTHING', [
      key,
      Buffer.from(JSON.stringify(value)),
      Number.MAX_SAFE_INTEGER
    ])
    const { rows } = await this.query<{ value: Buffer }>('SELECT value FROM cache WHERE key = $1', [key])
    return JSON.parse((rows[0] as { value: Buffer }).value.toString('utf8')) as unknown
  }

  async putState(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    const upsert =
      'INSERT INTO cache (key, owner, value, expires_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, value = excluded.value, expires_ms = excluded.expires_ms'
    const json = JSON.stringify(value)
    if (!owner) {
      await this.query(upsert, [key, null, Buffer.from(json), expiresAtMs])
      return
    }
    const id = ownerOf(owner.key_name, owner.session_id)
    await this.migrate()
    await this.transaction(async (client) => {
      if (!(await this.admitted(client, id, owner.since_ms ?? Date.now()))) return
      await client.query(upsert, [key, id, seal(await this.sessionKey(client, id), json), expiresAtMs])
    })
  }

  async putCached(key: string, value: CachedSummary, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.putState(key, value, expiresAtMs, owner)
  }

  /**
   * The session's key, records, cached rows and list row go in one transaction (a few rows, whatever the
   * session holds): from its commit nothing of the session can be read by any replica, its cold layer
   * included. Its cold layer's rows then go in slices, each a statement of its own. Last, the part of the
   * keys' table that held its key is rewritten (VACUUM FULL of a 32nd of the keys, milliseconds), so that
   * the key's bytes are in no page: what the session's rows leave in pages until they are reused is
   * ciphertext and keyed hashes.
   */
  async deleteSession(sessionId: string, keyName: string): Promise<DeletedSession> {
    await this.migrate()
    const owner = ownerOf(keyName, sessionId)
    let deleted: Omit<DeletedSession, 'space_reclaimed'> = { compactions: 0, cold_layer: 0, cached: 0, cache_keys: [] }
    let through = 0
    let keyPart: string | undefined
    await this.transaction(async (client) => {
      await this.bury(client, owner)
      const keys = await client.query<{ key: string }>('DELETE FROM cache WHERE owner = $1 RETURNING key', [owner])
      const records = await client.query('DELETE FROM records WHERE owner = $1', [owner])
      await client.query('DELETE FROM sessions WHERE owner = $1', [owner])
      await client.query('DELETE FROM activity WHERE key_name = $1 AND scope = $2', [keyName, owner])
      keyPart = (await client.query<{ part: string }>('DELETE FROM session_keys WHERE owner = $1 RETURNING tableoid::regclass::text AS part', [owner])).rows[0]
        ?.part
      const cold = await client.query<{ n: string; through: string | null }>('SELECT count(*) AS n, max(id) AS through FROM cold WHERE owner = $1', [owner])
      through = Number(cold.rows[0]?.through ?? 0)
      deleted = {
        compactions: records.rowCount ?? 0,
        cold_layer: Number(cold.rows[0]?.n ?? 0),
        cached: keys.rowCount ?? 0,
        cache_keys: keys.rows.map((r) => r.key)
      }
    })
    while (
      ((
        await this.query('DELETE FROM cold WHERE owner = $1 AND id IN (SELECT id FROM cold WHERE owner = $1 AND id <= $2 LIMIT $3)', [
          owner,
          through,
          PG_SLICE_ROWS
        ])
      ).rowCount ?? 0) === PG_SLICE_ROWS
    );
    if (keyPart === undefined) {
      // (nothing of it here: space is reclaimed unless an earlier deletion's rewrite is still being retried)
      const pending = this.reclaiming.pending
      return { ...deleted, space_reclaimed: !pending, ...(pending ? { reclaim_failure: "an earlier deletion's key table is still to be rewritten" } : {}) }
    }
    try {
      await this.rewriteKeys(keyPart)
      return { ...deleted, space_reclaimed: true }
    } catch (err) {
      this.unreclaimed.add(keyPart)
      this.reclaiming.start()
      return { ...deleted, space_reclaimed: false, reclaim_failure: `${err instanceof Error ? err.message : String(err)}: retried until it is done` }
    }
  }

  /** The part of the keys' table that held a deleted key, rewritten so that its bytes are in no page. */
  private async rewriteKeys(part: string): Promise<void> {
    if (!/^session_keys_\d+$/.test(part)) throw new Error(`the key was in ${part}, not a part of session_keys`)
    await this.pool.query({ text: `VACUUM (FULL) ${part}`, query_timeout: VACUUM_TIMEOUT_MS } as pg.QueryConfig)
  }

  /** Parts of the keys' table whose rewrite failed, retried (every RECLAIM_RETRY_MS) until each is done or the store closes. */
  private readonly unreclaimed = new Set<string>()
  private readonly reclaiming = new Retried(RECLAIM_RETRY_MS, async () => {
    for (const part of [...this.unreclaimed]) {
      await this.rewriteKeys(part)
      this.unreclaimed.delete(part)
    }
    return true
  })

  async deleteCompaction(compactionId: string, keyName: string): Promise<boolean> {
    const owner = compactionOwner(keyName, compactionId)
    let deleted = false
    await this.migrate()
    await this.transaction(async (client) => {
      await this.bury(client, owner)
      deleted = ((await client.query('DELETE FROM records WHERE owner = $1', [owner])).rowCount ?? 0) > 0
      await client.query('DELETE FROM session_keys WHERE owner = $1', [owner])
    })
    return deleted
  }

  /** The cold layer's tables of days this process knows exist. */
  private readonly days = new Set<string>()

  /** Makes the cold layer's table of the day `ms` falls in, where it is missing (replicas in turns, under a lock). */
  private async ensureDay(ms: number): Promise<void> {
    const day = coldDay(ms)
    if (this.days.has(day.name)) return
    await this.migrate()
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [PARTITION_LOCK])
      await client.query(dayPartition(ms))
    })
    this.days.add(day.name)
  }

  /**
   * Tallies added (or raised, for `max:` names) in one statement, in the rows' key order: two replicas adding
   * to the same rows take their locks in the same order, and never deadlock.
   */
  async addActivity(tallies: readonly ActivityTally[]): Promise<void> {
    if (tallies.length === 0) return
    await this.migrate()
    const rows = tallies
      .map((t) => ({ ...t, scope: activityScope(t.key_name, t.session_id) }))
      .sort((a, b) =>
        a.key_name < b.key_name
          ? -1
          : a.key_name > b.key_name
            ? 1
            : a.scope < b.scope
              ? -1
              : a.scope > b.scope
                ? 1
                : a.hour_ms - b.hour_ms || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
      )
    // a session's tallies are not added where it was deleted since their hour began (under the locks its deletion waits for)
    const sessions = [...new Set(rows.filter((r) => r.session_id !== null).map((r) => r.scope))].sort()
    await this.transaction(async (client) => {
      for (const owner of sessions) await client.query('SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))', [owner])
      await client.query(
        `INSERT INTO activity (key_name, scope, hour_ms, name, value)
           SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::float8[]) AS u(key_name, scope, hour_ms, name, value)
            WHERE u.scope = '' OR NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.owner = u.scope AND t.deleted_ms >= u.hour_ms)
           ON CONFLICT (key_name, scope, hour_ms, name) DO UPDATE
             SET value = CASE WHEN activity.name LIKE 'max:%' THEN GREATEST(activity.value, excluded.value) ELSE activity.value + excluded.value END`,
        [rows.map((r) => r.key_name), rows.map((r) => r.scope), rows.map((r) => r.hour_ms), rows.map((r) => r.name), rows.map((r) => r.value)]
      )
    })
  }

  async activity(keyName: string, sessionId: string | null, range: { fromMs: number; toMs: number }): Promise<ActivityRow[]> {
    await this.migrate()
    const { rows } = await this.query<{ hour_ms: string; name: string; value: number }>(
      'SELECT hour_ms, name, value FROM activity WHERE key_name = $1 AND scope = $2 AND hour_ms >= $3 AND hour_ms < $4',
      [keyName, activityScope(keyName, sessionId), range.fromMs, range.toMs]
    )
    return rows.map((r) => ({ hour_ms: Number(r.hour_ms), name: r.name, value: r.value }))
  }

  async saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<ColdSaved> {
    if (rows.length === 0) return { evicted: 0 }
    const createdMs = Date.parse(owner.created_at)
    const id = ownerOf(owner.key_name, owner.session_id)
    await this.ensureDay(createdMs)
    // One statement for all the entries, and the bounds, in one transaction.
    return this.transaction(async (client) => {
      if (!(await this.admitted(client, id, owner.since_ms ?? createdMs))) return { evicted: 0 }
      const key = await this.sessionKey(client, id)
      const terms = new Terms(key)
      const indexed = rows.map((r) => terms.counted(r.text))
      await client.query(
        `INSERT INTO cold (owner, compaction_id, kind, body, msg_from, msg_to, created_ms, terms, line_from, line_to, words, bytes)
         SELECT $1, $2, kind, body, msg_from, msg_to, $3, to_tsvector('simple', terms), line_from, line_to, words, bytes
           FROM unnest($4::text[], $5::bytea[], $6::int[], $7::int[], $8::text[], $9::int[], $10::int[], $11::int[], $12::int[])
             AS e(kind, body, msg_from, msg_to, terms, line_from, line_to, words, bytes)`,
        [
          id,
          owner.compaction_id,
          createdMs,
          rows.map((r) => r.kind),
          rows.map((r) => seal(key, r.text)),
          rows.map((r) => r.from),
          rows.map((r) => r.to),
          indexed.map((t) => t.terms),
          rows.map((r) => r.lines?.[0] ?? null),
          rows.map((r) => r.lines?.[1] ?? null),
          indexed.map((t) => t.words),
          rows.map((r) => Buffer.byteLength(r.text))
        ]
      )
      // past either bound (entries, bytes), the oldest entries go
      const evicted = await client.query(
        `DELETE FROM cold WHERE owner = $1 AND id <= GREATEST(
           (SELECT id FROM cold WHERE owner = $1 ORDER BY id DESC LIMIT 1 OFFSET $2),
           (SELECT id FROM (SELECT id, sum(coalesce(bytes, length(body))) OVER (ORDER BY id DESC) AS total FROM cold WHERE owner = $1) t
             WHERE total > $3 ORDER BY id DESC LIMIT 1))`,
        [id, this.maxSessionMemory, this.maxSessionBytes]
      )
      return { evicted: evicted.rowCount ?? 0 }
    })
  }

  async recall(sessionId: string, keyName: string, query: RecallQuery): Promise<RecallHit[]> {
    const s = await this.session(sessionId, keyName)
    if (!s) return []
    const terms = new Terms(s.key).query(query.text)
    if (terms.length === 0) return []
    const kinds = query.kinds && query.kinds.length > 0 ? [...query.kinds] : undefined
    // The session's terms are its own (HMACs under its key): the index finds its entries only. BM25 over the
    // session's own figures (rank.ts's, the same in SQL so that only the best rows leave the database): how
    // often each term occurs in each entry (its positions; the entry's vector cut to the query's terms in C,
    // by weighting them and keeping that weight, rather than unnested whole), how many entries hold it, the
    // session's count and mean length.
    const { rows: ranked } = await this.query<{ id: string; score: number }>(
      `WITH hits AS (
         SELECT c.id, c.words, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
           FROM cold c, unnest(ts_filter(setweight(c.terms, 'A', $4::text[]), '{a}')) u
          WHERE c.terms @@ to_tsquery('simple', $1) AND c.owner = $2 AND ($3::text[] IS NULL OR c.kind = ANY($3::text[]))
       ),
       figures AS (SELECT count(*)::float8 AS n, CASE WHEN avg(words) > 0 THEN avg(words) ELSE 1 END::float8 AS mean FROM cold WHERE owner = $2),
       df AS (SELECT lexeme, count(*)::float8 AS d FROM hits GROUP BY lexeme)
       SELECT h.id, sum(
           ln(1 + (greatest(f.n, 1) - df.d + 0.5) / (df.d + 0.5)) * h.tf * ($6::float8 + 1)
           / (h.tf + $6::float8 * (1 - $7::float8 + $7::float8 * coalesce(h.words, f.mean) / f.mean))
         ) AS score
         FROM hits h JOIN df ON df.lexeme = h.lexeme CROSS JOIN figures f
        GROUP BY h.id ORDER BY score DESC, h.id DESC LIMIT $5`,
      [terms.join(' | '), s.owner, kinds ?? null, terms, candidatesFor(query.limit), BM25_K1, BM25_B]
    )
    if (ranked.length === 0) return []
    const { rows } = await this.query<{
      id: string
      kind: string
      body: Buffer
      compaction_id: string
      msg_from: number
      msg_to: number
      created_ms: string
      line_from: number | null
      line_to: number | null
    }>('SELECT id, kind, body, compaction_id, msg_from, msg_to, created_ms, line_from, line_to FROM cold WHERE owner = $1 AND id = ANY($2::bigint[])', [
      s.owner,
      ranked.map((r) => Number(r.id))
    ])
    const rowOf = new Map(rows.map((r) => [Number(r.id), r]))
    const hits = ranked.flatMap(({ id, score }) => {
      const r = rowOf.get(Number(id))
      return r ? [recallHit(s.key, r, score)] : []
    })
    return byLines(hits, query.text, query.limit)
  }

  async compaction(sessionId: string, keyName: string, compactionId: string): Promise<CompactionDetail | undefined> {
    const s = await this.session(sessionId, keyName)
    if (!s) return undefined
    const { rows } = await this.query<{ body: Buffer }>('SELECT body FROM records WHERE owner = $1 AND id = $2', [s.owner, compactionId])
    const row = rows[0]
    if (!row) return undefined
    const kinds = await this.query<{ kind: string; n: string }>('SELECT kind, count(*) AS n FROM cold WHERE owner = $1 AND compaction_id = $2 GROUP BY kind', [
      s.owner,
      compactionId
    ])
    return { record: openRecord(s.key, row.body), memory: Object.fromEntries(kinds.rows.map((k) => [k.kind, Number(k.n)])) }
  }

  async entries(sessionId: string, keyName: string, compactionId: string, options: { after: number; limit: number }): Promise<EntryPage> {
    const s = await this.session(sessionId, keyName)
    if (!s) return { entries: [], last: null }
    const { rows } = await this.query<{ id: string; kind: string; body: Buffer; msg_from: number; msg_to: number }>(
      'SELECT id, kind, body, msg_from, msg_to FROM cold WHERE owner = $1 AND compaction_id = $2 AND id > $3 ORDER BY id LIMIT $4',
      [s.owner, compactionId, options.after, options.limit + 1]
    )
    const page = rows.slice(0, options.limit)
    return {
      entries: page.map((r) => ({ kind: r.kind, text: unseal(s.key, r.body), messages: [r.msg_from, r.msg_to] })),
      last: rows.length > options.limit ? Number(at(page, page.length - 1).id) : null
    }
  }

  async timeline(sessionId: string, keyName: string, limit: number): Promise<TimelinePoint[]> {
    const { rows } = await this.query<{ id: string; created_ms: string; raw: string; after: string; budget: string | null }>(
      'SELECT id, created_ms, raw, after, budget FROM records WHERE owner = $1 ORDER BY seq DESC LIMIT $2',
      [ownerOf(keyName, sessionId), limit]
    )
    return rows.reverse().map((r) => ({
      compaction_id: r.id,
      created_at: new Date(Number(r.created_ms)).toISOString(),
      raw_history_tokens: Number(r.raw),
      context_after_compaction: Number(r.after),
      budget_tokens: r.budget === null ? null : Number(r.budget)
    }))
  }

  async recap(sessionId: string, keyName: string): Promise<Recap | undefined> {
    const s = await this.session(sessionId, keyName)
    if (!s) return undefined
    const { rows } = await this.query<{ body: Buffer; n: number | null }>(
      'SELECT body, (SELECT n FROM sessions WHERE owner = $1) AS n FROM records WHERE owner = $1 ORDER BY seq DESC LIMIT 1',
      [s.owner]
    )
    const row = rows[0]
    return row ? { record: openRecord(s.key, row.body), compactions: Number(row.n ?? 1) } : undefined
  }

  /**
   * The cold layer's tables of days wholly before `beforeMs` are detached (CONCURRENTLY: no lock that stops
   * reads or writes of the others) and dropped, their bytes given back to the file system at once; the
   * rest (the day the cutoff falls in, records, expired cache rows) go in slices of PG_SLICE_ROWS rows, each
   * a statement of its own. Tomorrow's table is made ahead.
   */
  async prune(beforeMs: number, nowMs: number): Promise<{ records: number; cache: number; memory: number }> {
    await this.migrate()
    await this.ensureDay(nowMs)
    await this.ensureDay(nowMs + DAY_MS)
    const total = { records: 0, cache: 0, memory: 0 }
    const { rows: days } = await this.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
        WHERE p.oid = 'cold'::regclass ORDER BY c.relname`
    )
    for (const { name } of days) {
      const m = /^cold_(\d{4})(\d{2})(\d{2})$/.exec(name)
      if (!m || Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) + DAY_MS > beforeMs) continue
      total.memory += Number((await this.query<{ n: string }>(`SELECT count(*) AS n FROM ${name}`)).rows[0]?.n ?? 0)
      await this.detach(name)
      await this.query(`DROP TABLE ${name}`)
      this.days.delete(name)
    }
    for (;;) {
      const memory =
        (await this.query('DELETE FROM cold WHERE id IN (SELECT id FROM cold WHERE created_ms < $1 LIMIT $2)', [beforeMs, PG_SLICE_ROWS])).rowCount ?? 0
      const records = await this.pruneRecords(beforeMs)
      const cache =
        (await this.query('DELETE FROM cache WHERE key IN (SELECT key FROM cache WHERE expires_ms <= $1 LIMIT $2)', [nowMs, PG_SLICE_ROWS])).rowCount ?? 0
      const tallies =
        (
          await this.query(
            'DELETE FROM activity WHERE (key_name, scope, hour_ms, name) IN (SELECT key_name, scope, hour_ms, name FROM activity WHERE hour_ms < $1 LIMIT $2)',
            [beforeMs, PG_SLICE_ROWS]
          )
        ).rowCount ?? 0
      // (a tombstone outlives any work begun before its deletion: a day)
      await this.query('DELETE FROM tombstones WHERE deleted_ms < $1', [nowMs - TOMBSTONE_MS])
      total.memory += memory
      total.records += records
      total.cache += cache
      if (Math.max(memory, records, cache, tallies) < PG_SLICE_ROWS) return total
    }
  }

  /** Detaches a day's table from the cold layer without stopping the others' reads and writes (finishing a detach a stop cut short). */
  private async detach(name: string): Promise<void> {
    try {
      await this.query(`ALTER TABLE cold DETACH PARTITION ${name} CONCURRENTLY`)
    } catch (err) {
      if (!/pending detach|FINALIZE/i.test(err instanceof Error ? err.message : '')) throw err
      await this.query(`ALTER TABLE cold DETACH PARTITION ${name} FINALIZE`)
    }
  }

  /** One slice of old records, and their sessions' list rows brought up to date. */
  private async pruneRecords(beforeMs: number): Promise<number> {
    let count = 0
    await this.migrate()
    await this.transaction(async (client) => {
      const { rows } = await client.query<{ owner: string | null }>(
        'DELETE FROM records WHERE seq IN (SELECT seq FROM records WHERE created_ms < $1 ORDER BY created_ms LIMIT $2) RETURNING owner',
        [beforeMs, PG_SLICE_ROWS]
      )
      count = rows.length
      const owners = [...new Set(rows.map((r) => r.owner).filter((o) => o !== null))]
      if (owners.length === 0) return
      await client.query(
        `UPDATE sessions s SET n = f.n, first_ms = f.first_ms
           FROM (SELECT owner, count(*) AS n, min(created_ms) AS first_ms FROM records WHERE owner = ANY($1::text[]) GROUP BY owner) f WHERE s.owner = f.owner`,
        [owners]
      )
      await client.query('DELETE FROM sessions s WHERE s.owner = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM records r WHERE r.owner = s.owner)', [owners])
      // the last of an owner's data gone at retention: its key goes too
      await client.query(
        `DELETE FROM session_keys k WHERE k.owner = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM records r WHERE r.owner = k.owner)
           AND NOT EXISTS (SELECT 1 FROM cold c WHERE c.owner = k.owner) AND NOT EXISTS (SELECT 1 FROM cache x WHERE x.owner = k.owner)`,
        [owners]
      )
    })
    return count
  }

  async checkWritable(): Promise<void> {
    await this.query('INSERT INTO health (id, checked_ms) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET checked_ms = excluded.checked_ms', [Date.now()])
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.reclaiming.stop()
    await this.pool.end()
  }
}

/**
 * The keys' table in this many parts (by a hash of the owner): a deletion rewrites the part that held the
 * key (VACUUM FULL, so that its bytes are in no page), a 32nd of the keys, in milliseconds, and only the
 * sessions whose keys share that part wait meanwhile.
 */
const KEY_PARTITIONS = 32

/** The tables of the sealed schema (migration 3). The cold layer is in a table a UTC day (see ColdDays). */
const SEALED_SCHEMA = `
  CREATE TABLE session_keys (owner TEXT PRIMARY KEY, key BYTEA NOT NULL) PARTITION BY HASH (owner);
  DO $$ BEGIN
    FOR i IN 0..${KEY_PARTITIONS - 1} LOOP
      EXECUTE format('CREATE TABLE session_keys_%s PARTITION OF session_keys FOR VALUES WITH (MODULUS ${KEY_PARTITIONS}, REMAINDER %s)', i, i);
    END LOOP;
  END $$;
  CREATE TABLE sessions (owner TEXT PRIMARY KEY, key_name TEXT NOT NULL, session BYTEA NOT NULL, n INT NOT NULL, first_ms BIGINT NOT NULL, last_seq BIGINT NOT NULL);
  CREATE INDEX sessions_by_tenant ON sessions (key_name, last_seq);
  CREATE TABLE records (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    owner TEXT,
    key_name TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    raw BIGINT NOT NULL,
    after BIGINT NOT NULL,
    budget BIGINT,
    body BYTEA NOT NULL
  );
  CREATE INDEX records_by_owner ON records (owner, seq) WHERE owner IS NOT NULL;
  CREATE INDEX records_by_age ON records (created_ms);
  CREATE TABLE cold (
    id BIGSERIAL,
    owner TEXT NOT NULL,
    compaction_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    body BYTEA NOT NULL,
    msg_from INT NOT NULL,
    msg_to INT NOT NULL,
    created_ms BIGINT NOT NULL,
    terms TSVECTOR NOT NULL,
    PRIMARY KEY (id, created_ms)
  ) PARTITION BY RANGE (created_ms);
  CREATE INDEX cold_by_owner ON cold (owner, id);
  CREATE INDEX cold_by_compaction ON cold (owner, compaction_id);
  CREATE INDEX cold_by_age ON cold (created_ms);
  CREATE INDEX cold_terms ON cold USING GIN (terms);
  CREATE TABLE cache (key TEXT PRIMARY KEY, owner TEXT, value BYTEA NOT NULL, expires_ms BIGINT NOT NULL);
  CREATE INDEX cache_by_expiry ON cache (expires_ms);
  CREATE INDEX cache_by_owner ON cache (owner) WHERE owner IS NOT NULL;`

/** Rows moved a statement by the migration. */
const MOVE_BATCH = 2_000

/** Migration 3: the rows of the clear schema moved, sealed, into the sealed one; the old tables dropped. */
/** Migration 6: each record without a session sealed under its compaction's own key (compactionOwner). */
async function sealSessionless(client: pg.PoolClient): Promise<void> {
  for (let after = 0; ;) {
    const { rows } = await client.query<{ seq: string; id: string; key_name: string; body: Buffer }>(
      'SELECT seq, id, key_name, body FROM records WHERE owner IS NULL AND seq > $1 ORDER BY seq LIMIT $2',
      [after, MOVE_BATCH]
    )
    for (const r of rows) {
      const owner = compactionOwner(r.key_name, r.id)
      await client.query('INSERT INTO session_keys (owner, key) VALUES ($1, $2) ON CONFLICT (owner) DO NOTHING', [owner, newKey()])
      const key = (await client.query<{ key: Buffer }>('SELECT key FROM session_keys WHERE owner = $1', [owner])).rows[0]?.key ?? newKey()
      await client.query('UPDATE records SET owner = $1, body = $2 WHERE seq = $3', [owner, seal(key, r.body.toString('utf8')), r.seq])
    }
    if (rows.length < MOVE_BATCH) return
    after = Number(rows.at(-1)?.seq ?? after)
  }
}

async function sealSessions(client: pg.PoolClient): Promise<void> {
  await client.query(SEALED_SCHEMA)
  const keys = new Map<string, { key: Buffer; terms: Terms }>()
  const keyOf = async (keyName: string, sessionId: string): Promise<{ owner: string; key: Buffer; terms: Terms }> => {
    const owner = ownerOf(keyName, sessionId)
    let known = keys.get(owner)
    if (!known) {
      const key = newKey()
      await client.query('INSERT INTO session_keys (owner, key) VALUES ($1, $2)', [owner, key])
      known = { key, terms: new Terms(key) }
      keys.set(owner, known)
    }
    return { owner, ...known }
  }
  for (let after = 0; ;) {
    const { rows } = await client.query<{ seq: string; id: string; session_id: string | null; key_name: string; created_ms: string; record: StoredRecord }>(
      'SELECT seq, id, session_id, key_name, created_ms, record FROM compactions WHERE seq > $1 ORDER BY seq LIMIT $2',
      [after, MOVE_BATCH]
    )
    for (const r of rows) {
      const json = JSON.stringify(r.record)
      const figures = [r.record.stats.raw_history_tokens, r.record.stats.context_after_compaction, r.record.budget_tokens ?? null]
      const insert = 'INSERT INTO records (seq, id, owner, key_name, created_ms, raw, after, budget, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)'
      if (r.session_id === null) {
        await client.query(insert, [r.seq, r.id, null, r.key_name, r.created_ms, ...figures, Buffer.from(json)])
        continue
      }
      const { owner, key } = await keyOf(r.key_name, r.session_id)
      await client.query(insert, [r.seq, r.id, owner, r.key_name, r.created_ms, ...figures, seal(key, json)])
      await client.query(
        `INSERT INTO sessions (owner, key_name, session, n, first_ms, last_seq) VALUES ($1, $2, $3, 1, $4, $5)
           ON CONFLICT (owner) DO UPDATE SET n = sessions.n + 1, first_ms = least(sessions.first_ms, excluded.first_ms), last_seq = greatest(sessions.last_seq, excluded.last_seq)`,
        [owner, r.key_name, seal(key, r.session_id), r.created_ms, r.seq]
      )
    }
    if (rows.length < MOVE_BATCH) break
    after = Number(at(rows, rows.length - 1).seq)
  }
  await client.query("SELECT setval(pg_get_serial_sequence('records', 'seq'), greatest((SELECT max(seq) FROM records), 1))")
  const days = await client.query<{ day: string }>('SELECT DISTINCT floor(created_ms / 86400000)::bigint AS day FROM memory')
  for (const { day } of days.rows) await client.query(dayPartition(Number(day) * DAY_MS))
  for (let after = 0; ;) {
    const { rows } = await client.query<{
      id: string
      key_name: string
      session_id: string
      compaction_id: string
      kind: string
      text: string
      msg_from: number
      msg_to: number
      created_ms: string
    }>('SELECT id, key_name, session_id, compaction_id, kind, text, msg_from, msg_to, created_ms FROM memory WHERE id > $1 ORDER BY id LIMIT $2', [
      after,
      MOVE_BATCH
    ])
    for (const m of rows) {
      const { owner, key, terms } = await keyOf(m.key_name, m.session_id)
      await client.query(
        "INSERT INTO cold (id, owner, compaction_id, kind, body, msg_from, msg_to, created_ms, terms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, to_tsvector('simple', $9))",
        [m.id, owner, m.compaction_id, m.kind, seal(key, m.text), m.msg_from, m.msg_to, m.created_ms, terms.of(m.text)]
      )
    }
    if (rows.length < MOVE_BATCH) break
    after = Number(at(rows, rows.length - 1).id)
  }
  await client.query("SELECT setval(pg_get_serial_sequence('cold', 'id'), greatest((SELECT max(id) FROM cold), 1))")
  const cached = await client.query<{ key: string; value: unknown; expires_ms: string; key_name: string | null; session_id: string | null }>(
    'SELECT key, value, expires_ms, key_name, session_id FROM summary_cache'
  )
  for (const c of cached.rows) {
    const json = JSON.stringify(c.value)
    if (c.session_id === null) {
      await client.query('INSERT INTO cache (key, owner, value, expires_ms) VALUES ($1, NULL, $2, $3)', [c.key, Buffer.from(json), c.expires_ms])
      continue
    }
    const { owner, key } = await keyOf(c.key_name ?? '', c.session_id)
    await client.query('INSERT INTO cache (key, owner, value, expires_ms) VALUES ($1, $2, $3, $4)', [c.key, owner, seal(key, json), c.expires_ms])
  }
  await client.query('DROP TABLE memory, compactions, summary_cache')
}

const DAY_MS = 86_400_000

/** The cold layer's table of the UTC day `ms` falls in: its name and its range. */
export function coldDay(ms: number): { name: string; from: number; to: number } {
  const from = Math.floor(ms / DAY_MS) * DAY_MS
  return { name: `cold_${new Date(from).toISOString().slice(0, 10).replaceAll('-', '')}`, from, to: from + DAY_MS }
}

/** The statement that makes the day's table of the cold layer, where it is missing. */
function dayPartition(ms: number): string {
  const day = coldDay(ms)
  return `CREATE TABLE IF NOT EXISTS ${day.name} PARTITION OF cold FOR VALUES FROM (${day.from}) TO (${day.to})`
}
