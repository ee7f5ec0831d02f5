import pg from 'pg'
import type { CachedSummary, CompactionRecord, DeletedSession, MemoryOwner, SessionOwner, TimelinePoint, MemoryRow, Recap, RecallHit, RecallQuery, RecordPage, SessionPage, SessionRow, Store, CompactionDetail } from './store.js'
import { StoreError, sessionSummary } from './store.js'
import { KIND_WEIGHT, MAX_SESSION_MEMORY, type StoredRecord, decodeCursor, encodeCursor, queryWords, withSections } from './common.js'
import { at } from '../compaction/index.js'

/**
 * Schema migrations, versioned in code: migration N is recorded in schema_migrations as version N.
 * Append only; never edit one that has shipped. They run at start, in one transaction, under an advisory
 * lock, so that replicas starting together migrate once.
 */
const MIGRATIONS: readonly string[] = [
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
   CREATE INDEX summary_cache_by_owner ON summary_cache (key_name, session_id) WHERE session_id IS NOT NULL;`
]

export const PG_SCHEMA_VERSION = MIGRATIONS.length
/** How long a deletion's table rewrite may take before the deletion says its space was not reclaimed. */
const VACUUM_TIMEOUT_MS = 60_000
/** The advisory lock key under which migrations run (any fixed number the deployment does not use elsewhere). */
const MIGRATION_LOCK = 7_318_204_551

/** Whether COMPACT_DB names a PostgreSQL database rather than a SQLite file. */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value)
}

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

export interface PostgresOptions {
  /** Connections in the pool at most. */
  maxConnections?: number
  /** Told when an idle connection fails (the server went away); the pool makes new ones when it is back. */
  onPoolError?: (err: Error) => void
}

/**
 * JSON as PostgreSQL's jsonb takes it: it refuses the escapes of NUL and of lone surrogates (text a
 * client may send), and refused, the record of an answered compaction was lost. Those characters are
 * kept as U+FFFD; an escaped backslash before a `u` is left as it is.
 */
export function storableJson(value: unknown): string {
  return JSON.stringify(value).replace(/(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi, '$1\\ufffd')
}

/** Text as a PostgreSQL text column takes it: no NUL (lone surrogates are sent as U+FFFD already). */
export function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\ufffd') : text
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
    this.pool.on('error', (err) => options.onPoolError?.(err))
  }

  /** Runs the migrations (once; again after a failure). Every operation waits for them. */
  migrate(): Promise<void> {
    this.migrated ??= this.runMigrations().catch((err: unknown) => {
      this.migrated = undefined
      throw err instanceof StoreError ? err : new StoreError(`cannot migrate ${redactedUrl(this.url)}: ${err instanceof Error ? err.message : String(err)}`, { cause: err })
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
        await client.query(at(MIGRATIONS, v))
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [v + 1])
      }
    })
  }

  /** Runs `work` in one transaction on one connection: committed when it returns, rolled back when it throws. */
  private async transaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
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
      await work(client)
      await client.query('COMMIT')
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

  async saveRecord(record: CompactionRecord): Promise<void> {
    await this.query('INSERT INTO compactions (id, session_id, key_name, created_at, created_ms, record) VALUES ($1, $2, $3, $4, $5, $6)', [
      record.id,
      record.session_id,
      record.key_name,
      record.created_at,
      Date.parse(record.created_at),
      storableJson({ ...record, summary: { text: record.summary.text } })
    ])
  }

  async listRecords(sessionId: string, keyName: string, options: { limit: number; cursor?: string }): Promise<RecordPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const { rows } = await this.query<{ seq: string; record: StoredRecord }>(
      'SELECT seq, record FROM compactions WHERE key_name = $1 AND session_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4',
      [keyName, sessionId, before, options.limit + 1]
    )
    const page = rows.slice(0, options.limit)
    return {
      records: page.map((r) => withSections(r.record)),
      next_cursor: rows.length > options.limit ? encodeCursor(Number(at(page, page.length - 1).seq)) : null
    }
  }

  async listSessions(keyName: string, options: { limit: number; cursor?: string }): Promise<SessionPage> {
    const before = options.cursor ? decodeCursor(options.cursor) : Number.MAX_SAFE_INTEGER
    const { rows } = await this.query<{ session_id: string; n: string; first_ms: string; last_seq: string; record: StoredRecord }>(
      `SELECT g.session_id, g.n, g.first_ms, g.last_seq, c.record
         FROM (SELECT session_id, COUNT(*) AS n, MIN(created_ms) AS first_ms, MAX(seq) AS last_seq
                 FROM compactions WHERE key_name = $1 AND session_id IS NOT NULL GROUP BY session_id) g
         JOIN compactions c ON c.seq = g.last_seq
        WHERE g.last_seq < $2 ORDER BY g.last_seq DESC LIMIT $3`,
      [keyName, before, options.limit + 1]
    )
    const page = rows.slice(0, options.limit)
    const row = (r: (typeof rows)[number]): SessionRow => ({ session_id: r.session_id, n: Number(r.n), first_ms: Number(r.first_ms), last_seq: Number(r.last_seq), record: r.record })
    return {
      sessions: page.map((r) => sessionSummary(row(r))),
      next_cursor: rows.length > options.limit ? encodeCursor(Number(at(page, page.length - 1).last_seq)) : null
    }
  }

  async getCached(key: string, nowMs: number): Promise<CachedSummary | undefined> {
    const { rows } = await this.query<{ value: CachedSummary }>('SELECT value FROM summary_cache WHERE key = $1 AND expires_ms > $2', [key, nowMs])
    return rows[0]?.value
  }

  async getState(key: string, nowMs: number): Promise<unknown> {
    const { rows } = await this.query<{ value: unknown }>('SELECT value FROM summary_cache WHERE key = $1 AND expires_ms > $2', [key, nowMs])
    return rows[0]?.value
  }

  async putState(key: string, value: unknown, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.query(
      `INSERT INTO summary_cache (key, value, expires_ms, key_name, session_id) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms, key_name = excluded.key_name, session_id = excluded.session_id`,
      [key, storableJson(value), expiresAtMs, owner?.key_name ?? null, owner?.session_id ?? null]
    )
  }

  async putCached(key: string, value: CachedSummary, expiresAtMs: number, owner?: SessionOwner): Promise<void> {
    await this.putState(key, value, expiresAtMs, owner)
  }

  /**
   * The rows go in one transaction; then the tables that held them are rewritten (VACUUM FULL), since a
   * plain VACUUM only marks their space free and leaves their bytes in the pages until reused. The rewrite
   * locks each table while it runs (a store of 10,000 records: see the README's figure).
   */
  async deleteSession(sessionId: string, keyName: string): Promise<DeletedSession> {
    await this.migrate()
    let deleted: Omit<DeletedSession, 'space_reclaimed'> = { compactions: 0, cold_layer: 0, cached: 0, cache_keys: [] }
    await this.transaction(async (client) => {
      const keys = await client.query<{ key: string }>('DELETE FROM summary_cache WHERE key_name = $1 AND session_id = $2 RETURNING key', [keyName, sessionId])
      const records = await client.query('DELETE FROM compactions WHERE key_name = $1 AND session_id = $2', [keyName, sessionId])
      const memory = await client.query('DELETE FROM memory WHERE key_name = $1 AND session_id = $2', [keyName, sessionId])
      deleted = { compactions: records.rowCount ?? 0, cold_layer: memory.rowCount ?? 0, cached: keys.rowCount ?? 0, cache_keys: keys.rows.map((r) => r.key) }
    })
    const tables = [deleted.compactions > 0 && 'compactions', deleted.cold_layer > 0 && 'memory', deleted.cached > 0 && 'summary_cache'].filter((t) => t !== false)
    if (tables.length === 0) return { ...deleted, space_reclaimed: true }
    try {
      await this.pool.query({ text: `VACUUM (FULL) ${tables.join(', ')}`, query_timeout: VACUUM_TIMEOUT_MS } as pg.QueryConfig)
      return { ...deleted, space_reclaimed: true }
    } catch (err) {
      return { ...deleted, space_reclaimed: false, reclaim_failure: err instanceof Error ? err.message : String(err) }
    }
  }

  async saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<void> {
    if (rows.length === 0) return
    const createdMs = Date.parse(owner.created_at)
    // One statement for all the entries, and the cap, in one transaction.
    await this.migrate()
    await this.transaction(async (client) => {
      await client.query(
        `INSERT INTO memory (key_name, session_id, compaction_id, kind, text, msg_from, msg_to, created_at, created_ms)
         SELECT $1, $2, $3, kind, text, msg_from, msg_to, $4, $5 FROM unnest($6::text[], $7::text[], $8::int[], $9::int[]) AS e(kind, text, msg_from, msg_to)`,
        [owner.key_name, owner.session_id, owner.compaction_id, owner.created_at, createdMs, rows.map((r) => r.kind), rows.map((r) => storableText(r.text)), rows.map((r) => r.from), rows.map((r) => r.to)]
      )
      await client.query(
        'DELETE FROM memory WHERE key_name = $1 AND session_id = $2 AND id <= (SELECT id FROM memory WHERE key_name = $1 AND session_id = $2 ORDER BY id DESC LIMIT 1 OFFSET $3)',
        [owner.key_name, owner.session_id, MAX_SESSION_MEMORY]
      )
    })
  }

  async recall(sessionId: string, keyName: string, query: RecallQuery): Promise<RecallHit[]> {
    const words = queryWords(query.text)
    if (words.length === 0) return []
    const kinds = query.kinds && query.kinds.length > 0 ? [...query.kinds] : undefined
    const weights = Object.entries(KIND_WEIGHT)
      .map(([kind, w]) => `WHEN '${kind}' THEN ${w}`)
      .join(' ')
    // websearch_to_tsquery reads "a or b or c" as any of the words (each stemmed like the entries).
    const { rows } = await this.query<{ kind: string; text: string; compaction_id: string; msg_from: number; msg_to: number; created_at: string; rank: number }>(
      `SELECT kind, text, compaction_id, msg_from, msg_to, created_at,
          ts_rank(search, q) * CASE kind ${weights} ELSE 1.0 END AS rank
        FROM memory, websearch_to_tsquery('english', $1) AS q
        WHERE search @@ q AND key_name = $2 AND session_id = $3 AND ($4::text[] IS NULL OR kind = ANY($4::text[]))
        ORDER BY rank DESC, id DESC LIMIT $5`,
      [words.join(' or '), keyName, sessionId, kinds ?? null, query.limit]
    )
    return rows.map((r) => ({
      kind: r.kind,
      text: r.text,
      compaction_id: r.compaction_id,
      messages: [r.msg_from, r.msg_to],
      score: Number(Number(r.rank).toFixed(4)),
      created_at: r.created_at
    }))
  }

  async compaction(sessionId: string, keyName: string, compactionId: string): Promise<CompactionDetail | undefined> {
    const { rows } = await this.query<{ record: StoredRecord }>('SELECT record FROM compactions WHERE key_name = $1 AND session_id = $2 AND id = $3', [keyName, sessionId, compactionId])
    const row = rows[0]
    if (!row) return undefined
    const kinds = await this.query<{ kind: string; n: string }>('SELECT kind, count(*) AS n FROM memory WHERE key_name = $1 AND session_id = $2 AND compaction_id = $3 GROUP BY kind', [keyName, sessionId, compactionId])
    return { record: withSections(row.record), memory: Object.fromEntries(kinds.rows.map((k) => [k.kind, Number(k.n)])) }
  }

  async timeline(sessionId: string, keyName: string, limit: number): Promise<TimelinePoint[]> {
    const { rows } = await this.query<{ id: string; created_at: string; raw: string; after: string; budget: string | null }>(
      `SELECT id, created_at, record->'stats'->>'raw_history_tokens' AS raw, record->'stats'->>'context_after_compaction' AS after, record->>'budget_tokens' AS budget
         FROM compactions WHERE key_name = $1 AND session_id = $2 ORDER BY seq DESC LIMIT $3`,
      [keyName, sessionId, limit]
    )
    return rows.reverse().map((r) => ({ compaction_id: r.id, created_at: r.created_at, raw_history_tokens: Number(r.raw), context_after_compaction: Number(r.after), budget_tokens: r.budget === null ? null : Number(r.budget) }))
  }

  async recap(sessionId: string, keyName: string): Promise<Recap | undefined> {
    const { rows } = await this.query<{ record: StoredRecord; n: string }>(
      `SELECT record, (SELECT count(*) FROM compactions WHERE key_name = $1 AND session_id = $2) AS n
         FROM compactions WHERE key_name = $1 AND session_id = $2 ORDER BY seq DESC LIMIT 1`,
      [keyName, sessionId]
    )
    const row = rows[0]
    return row ? { record: withSections(row.record), compactions: Number(row.n) } : undefined
  }

  async prune(beforeMs: number, nowMs: number): Promise<{ records: number; cache: number; memory: number }> {
    const records = await this.query('DELETE FROM compactions WHERE created_ms < $1', [beforeMs])
    const cache = await this.query('DELETE FROM summary_cache WHERE expires_ms <= $1', [nowMs])
    const memory = await this.query('DELETE FROM memory WHERE created_ms < $1', [beforeMs])
    return { records: records.rowCount ?? 0, cache: cache.rowCount ?? 0, memory: memory.rowCount ?? 0 }
  }

  async checkWritable(): Promise<void> {
    await this.query('INSERT INTO health (id, checked_ms) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET checked_ms = excluded.checked_ms', [Date.now()])
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.pool.end()
  }
}
