/**
 * A master key's rotation: every session key of a store wrapped under the current master key (those wrapped
 * under the previous one, and those not wrapped at all), in small batches while the gateway runs. A key is
 * replaced only where it is still the one read (a session deleted or made meanwhile is left as it is).
 */
import pg from 'pg'
import { KeyRing } from './keyring.js'
import { isPostgresUrl } from './common.js'
import { parsePostgresUrl } from './postgres.js'
import { openConnection } from './sqlite.js'

/** Keys read and rewritten a batch. */
const BATCH = 500

export interface Rewrapped {
  /** Session keys in the store. */
  keys: number
  /** Those wrapped anew under the current master key. */
  rewrapped: number
}

/** Rewraps the keys of the store at `db` (a SQLite file, or a postgres:// URL) under the ring's current master key. */
export async function rewrapKeys(db: string, ring: KeyRing): Promise<Rewrapped> {
  if (!ring.wrapped) throw new Error('no master key to wrap under: set COMPACT_MASTER_KEY (and the one it replaces as COMPACT_MASTER_KEY_PREVIOUS)')
  return isPostgresUrl(db) ? rewrapPostgres(db, ring) : rewrapSqlite(db, ring)
}

function rewrapSqlite(path: string, ring: KeyRing): Rewrapped {
  const db = openConnection(path)
  try {
    const page = db.prepare('SELECT owner, key FROM session_keys WHERE owner > ? ORDER BY owner LIMIT ?')
    const update = db.prepare('UPDATE session_keys SET key = ? WHERE owner = ? AND key = ?')
    const done: Rewrapped = { keys: 0, rewrapped: 0 }
    for (let after = ''; ;) {
      const rows = page.all(after, BATCH) as { owner: string; key: Buffer }[]
      if (rows.length === 0) return done
      db.transaction(() => {
        for (const r of rows) {
          done.keys++
          const wrapped = ring.rewrap(r.owner, r.key)
          if (wrapped) done.rewrapped += update.run(wrapped, r.owner, r.key).changes
        }
      })()
      after = rows.at(-1)?.owner ?? after
    }
  } finally {
    db.close()
  }
}

async function rewrapPostgres(url: string, ring: KeyRing): Promise<Rewrapped> {
  const { connectionString, schema } = parsePostgresUrl(url)
  const client = new pg.Client({ connectionString, options: `-c search_path=${schema}` })
  await client.connect()
  try {
    const done: Rewrapped = { keys: 0, rewrapped: 0 }
    for (let after = ''; ;) {
      const { rows } = await client.query<{ owner: string; key: Buffer }>('SELECT owner, key FROM session_keys WHERE owner > $1 ORDER BY owner LIMIT $2', [
        after,
        BATCH
      ])
      if (rows.length === 0) return done
      await client.query('BEGIN')
      for (const r of rows) {
        done.keys++
        const wrapped = ring.rewrap(r.owner, r.key)
        if (wrapped)
          done.rewrapped += (await client.query('UPDATE session_keys SET key = $1 WHERE owner = $2 AND key = $3', [wrapped, r.owner, r.key])).rowCount ?? 0
      }
      await client.query('COMMIT')
      after = rows.at(-1)?.owner ?? after
    }
  } finally {
    await client.end()
  }
}
