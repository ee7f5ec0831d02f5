import { writeFileSync } from 'node:fs'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { emptySections } from '../../src/compaction/index.js'
import { SCHEMA_VERSION, SqliteStore } from '../../src/storage/sqlite.js'
import { type CompactionRecord, InvalidCursorError } from '../../src/storage/store.js'
import { tempDb } from '../helpers/process.js'

const stores: SqliteStore[] = []
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})
const open = (path = tempDb()) => {
  const s = new SqliteStore(path)
  stores.push(s)
  return s
}

function record(id: string, session: string, key: string, at = '2026-11-30T00:00:00.000Z'): CompactionRecord {
  return {
    id,
    session_id: session,
    key_name: key,
    created_at: at,
    mode: 'manual',
    reason: 'manual',
    stats: { raw_history_tokens: 1, summary_tokens: 1, compacted_turns: 1, compacted_messages: 1, kept_messages: 1, kept_tokens: 1, context_after_compaction: 1, clipped_tool_results: 0, guard_added: 0, estimate_scale: 1 },
    summarizer: { kind: 'extractive', model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: 1 },
    doctrine_version: 'v',
    summary: { text: `summary ${id}`, sections: emptySections() }
  }
}

describe('SqliteStore', () => {
  it('creates the file and its folder, in WAL mode, migrated to the current schema', () => {
    const path = tempDb().replace('compaction.db', 'nested/deeper/c.db')
    open(path)
    const db = new Database(path, { readonly: true })
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal')
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION)
    db.close()
  })

  it("lists a tenant's session newest first, in pages", () => {
    const s = open()
    for (let i = 1; i <= 5; i++) s.saveRecord(record(`c${i}`, 'sess', 'alpha'))
    s.saveRecord(record('other', 'sess', 'beta'))
    const first = s.listRecords('sess', 'alpha', { limit: 2 })
    expect(first.records.map((r) => r.id)).toEqual(['c5', 'c4'])
    const second = s.listRecords('sess', 'alpha', { limit: 2, cursor: first.next_cursor! })
    expect(second.records.map((r) => r.id)).toEqual(['c3', 'c2'])
    const last = s.listRecords('sess', 'alpha', { limit: 2, cursor: second.next_cursor! })
    expect(last.records.map((r) => r.id)).toEqual(['c1'])
    expect(last.next_cursor).toBeNull()
    expect(s.listRecords('sess', 'beta', { limit: 10 }).records.map((r) => r.id)).toEqual(['other'])
    expect(s.listRecords('sess', 'gamma', { limit: 10 })).toEqual({ records: [], next_cursor: null })
    expect(() => s.listRecords('sess', 'alpha', { limit: 2, cursor: 'garbage' })).toThrow(InvalidCursorError)
  })

  it('keeps cached summaries until they expire, and prunes old rows', () => {
    const s = open()
    const value = { sections: emptySections(), model: 'm' }
    s.putCached('k', value, 2_000)
    expect(s.getCached('k', 1_999)).toEqual(value)
    expect(s.getCached('k', 2_000)).toBeUndefined()
    s.saveRecord(record('old', 's', '', '2026-01-01T00:00:00.000Z'))
    s.saveRecord(record('new', 's', '', '2026-11-29T00:00:00.000Z'))
    expect(s.prune(Date.parse('2026-06-01T00:00:00.000Z'), 3_000)).toEqual({ records: 1, cache: 1, memory: 0 })
    expect(s.listRecords('s', '', { limit: 10 }).records.map((r) => r.id)).toEqual(['new'])
  })

  it('refuses a file that is not a database, naming it', () => {
    const path = tempDb()
    writeFileSync(path, 'this is not a database, just text that happens to be here '.repeat(100))
    expect(() => new SqliteStore(path)).toThrow(/cannot open the database .*compaction\.db: file is not a database/)
  })

  it('refuses a schema newer than it knows', () => {
    const path = tempDb()
    const db = new Database(path)
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`)
    db.close()
    expect(() => new SqliteStore(path)).toThrow(/newer than this build knows/)
  })

  it('says when it cannot be written', () => {
    const s = open()
    expect(() => s.checkWritable()).not.toThrow()
    s.connection.pragma('query_only = 1')
    expect(() => s.checkWritable()).toThrow(/readonly|read-only/i)
  })
})
