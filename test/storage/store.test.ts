import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import Database from 'better-sqlite3'
import pg from 'pg'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { emptySections } from '../../src/compaction/index.js'
import { MIGRATIONS as PG_MIGRATIONS, PG_SCHEMA_VERSION, PostgresStore, coldDay } from '../../src/storage/postgres.js'
import { SCHEMA_VERSION, SqliteStore } from '../../src/storage/sqlite.js'
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/storage/sqlite-schema.js'
import { MAX_WRITE_BACKLOG } from '../../src/contract/defaults.js'
import { type CompactionRecord, InvalidCursorError, type MemoryOwner, type Store } from '../../src/storage/store.js'
import { ownerOf, unseal } from '../../src/storage/sealing.js'
import { tempDb } from '../helpers/process.js'
import { compactionRecord } from '../helpers/records.js'
import { until } from '../helpers/wait.js'
import { PG_URL, dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

const stores: Store[] = []
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close()
})
afterAll(async () => {
  if (!pgMissing) await dropSchemas()
})

const record = (id: string, session: string, key: string, at?: string): CompactionRecord => compactionRecord(id, session, key, at)

const backends: { name: string; missing: string | undefined; open: (sessionBytes?: number) => Store }[] = [
  { name: 'SQLite', missing: undefined, open: (bytes) => new SqliteStore(tempDb(), bytes ? { maxSessionBytes: bytes } : {}) },
  { name: 'PostgreSQL', missing: pgMissing, open: (bytes) => new PostgresStore(freshPgUrl(), bytes ? { maxSessionBytes: bytes } : {}) }
]

/** Entries of a session of its own words: what the ranking tests search. */
const MINE = [
  'the rollout codename is bluefin, keep it out of the changelog',
  'deploy the canary to eu-west first, then the rest of the fleet',
  'pytest tests/test_parser.py::test_nested_quotes FAILED: assert 3 == 4',
  'the cache is kept for five minutes, the hour-long one costs twice as much to write',
  'what did we do when it failed? we retried twice and it went through',
  'src/parser.py:42: error: unexpected indent in the tokenizer loop',
  'npm run build → ok',
  'the release branch is cut on thursdays; the freeze starts a day before'
]

/** The same behaviour from every store: the contract of the Store interface. */
for (const backend of backends) {
  describe.skipIf(backend.missing !== undefined)(`${backend.name} store${backend.missing ? ` (skipped: ${backend.missing})` : ''}`, () => {
    const open = (): Store => {
      const s = backend.open()
      stores.push(s)
      return s
    }

    it('keeps the first value of a piece of its own state for good: later ones, racing or not, read the first', async () => {
      const s = open()
      const raced = await Promise.all(['first', 'second', 'third'].map((v) => s.firstState('gateway:test-secret', v)))
      expect(new Set(raced).size).toBe(1)
      expect(await s.firstState('gateway:test-secret', 'later')).toBe(raced[0])
      // never expires: read far in the future, and not taken by a prune
      await s.prune(Date.now() + 1e12, Date.now() + 1e12)
      expect(await s.getState('gateway:test-secret', Date.now() + 1e12)).toBe(raced[0])
    })

    it("ranks a session's entries by plain BM25 over its own: the same scores alone and beside sessions holding far more", async () => {
      const s = open()
      const at = '2026-11-30T00:00:00.000Z'
      await s.saveMemory(
        { compaction_id: 'c_mine', session_id: 'mine', key_name: 'alpha', created_at: at },
        MINE.map((text, i) => ({ kind: i % 2 ? 'output' : 'answer', text, from: i, to: i }))
      )
      const queries = ['rollout codename', 'parser failed', 'cache write costs', 'deploy the fleet first', 'freeze before release']
      const search = (): Promise<unknown[]> => Promise.all(queries.map((text) => s.recall('mine', 'alpha', { text, limit: 10 })))
      const alone = await search()
      // nine other sessions, each with 200 long entries of the same words: a table-wide figure would move every score
      const filler = (k: number): string => `${'the parser rollout cache release fleet deploy codename freeze '.repeat(8)} filler ${k}`
      for (let o = 0; o < 9; o++)
        await s.saveMemory(
          { compaction_id: `c_other${o}`, session_id: `other${o}`, key_name: 'alpha', created_at: at },
          Array.from({ length: 200 }, (_, k) => ({ kind: 'output', text: filler(k), from: k, to: k }))
        )
      expect(await search()).toEqual(alone)
      expect((alone[0] as { text: string }[])[0]?.text).toBe(MINE[0])
    })

    it('leaves question words out of a query and favours no kind: equal texts rank equal, the newer first', async () => {
      const s = open()
      const at = '2026-11-30T00:00:00.000Z'
      await s.saveMemory({ compaction_id: 'c1', session_id: 'q', key_name: 'alpha', created_at: at }, [
        ...MINE.map((text, i) => ({ kind: 'output', text, from: i, to: i })),
        { kind: 'ask', text: 'the staging database is called orca', from: 20, to: 20 },
        { kind: 'answer', text: 'the staging database is called orca', from: 21, to: 21 }
      ])
      // "what did we … when" are in MINE[4]: only "cache" counts
      expect((await s.recall('q', 'alpha', { text: 'what did we do about the cache when', limit: 10 })).map((h) => h.text)).toEqual([MINE[3]])
      const twins = await s.recall('q', 'alpha', { text: 'staging database', limit: 10 })
      expect(twins.map((h) => h.kind)).toEqual(['answer', 'ask'])
      expect(twins[0]!.score).toBe(twins[1]!.score)
      // a query of question words alone still searches them
      expect((await s.recall('q', 'alpha', { text: 'what did we do', limit: 10 })).map((h) => h.text)).toEqual([MINE[4]])
    })

    it("keeps a session's cold layer within its bound in bytes, the oldest going first and counted; other sessions untouched", async () => {
      const s = backend.open(2_000)
      stores.push(s)
      const at = '2026-11-30T00:00:00.000Z'
      const text = (c: number, k: number): string => `compaction ${c} passage ${k} marker${c}x${k} ${'x'.repeat(180)}`
      const saved: number[] = []
      for (let c = 0; c < 4; c++) {
        const rows = Array.from({ length: 4 }, (_, k) => ({
          kind: 'output',
          text: text(c, k),
          from: k,
          to: k,
          lines: [k * 3 + 1, k * 3 + 3] as [number, number]
        }))
        saved.push((await s.saveMemory({ compaction_id: `c${c}`, session_id: 'capped', key_name: 'alpha', created_at: at }, rows)).evicted)
        await s.saveMemory({ compaction_id: `o${c}`, session_id: 'other', key_name: 'alpha', created_at: at }, [
          { kind: 'ask', text: `other ${c}`, from: 0, to: 0 }
        ])
      }
      // each passage is 212 bytes: nine fit in 2,000; the 10th and later pushed the oldest out
      expect(saved).toEqual([0, 0, 3, 4])
      expect(await s.recall('capped', 'alpha', { text: 'marker0x2', limit: 5 })).toEqual([])
      const newest = await s.recall('capped', 'alpha', { text: 'marker3x1', limit: 5 })
      expect(newest.map((h) => [h.text, h.lines, h.messages])).toEqual([[text(3, 1), [4, 6], [1, 1]]])
      expect(await s.recall('capped', 'alpha', { text: 'marker1x2', limit: 5 })).toEqual([])
      expect(await s.recall('capped', 'alpha', { text: 'marker1x3', limit: 5 })).toHaveLength(1)
      expect(await s.recall('other', 'alpha', { text: 'other', limit: 10 })).toHaveLength(4)
    })

    it("seals a compaction made without a session under a key of its own, deletes it by its id (the tenant's only), and drops its key at retention", async () => {
      const s = open()
      const sessionless = (id: string, key: string, at = '2026-11-30T00:00:00.000Z'): CompactionRecord => ({
        ...record(id, 'x', key, at),
        session_id: null,
        summary: { text: `summary of ${id} zqxloose${id}vv`, sections: emptySections() }
      })
      await s.saveRecord(sessionless('cmp_loose_1', 'alpha'))
      await s.saveRecord(sessionless('cmp_loose_2', 'alpha', '2026-01-01T00:00:00.000Z'))
      expect(await s.deleteCompaction('cmp_loose_1', 'beta')).toBe(false)
      expect(await s.deleteCompaction('cmp_loose_1', 'alpha')).toBe(true)
      expect(await s.deleteCompaction('cmp_loose_1', 'alpha')).toBe(false)
      // a compaction of a session is not deleted this way
      await s.saveRecord(record('cmp_in_session', 'sess', 'alpha'))
      expect(await s.deleteCompaction('cmp_in_session', 'alpha')).toBe(false)
      expect((await s.listRecords('sess', 'alpha', { limit: 5 })).records.map((r) => r.id)).toEqual(['cmp_in_session'])
      // the older one pruned at retention
      expect((await s.prune(Date.parse('2026-06-01T00:00:00.000Z'), 0)).records).toBe(1)
      expect(await s.deleteCompaction('cmp_loose_2', 'alpha')).toBe(false)
    })

    it("lists a key's session newest first, in pages", async () => {
      const s = open()
      for (let i = 1; i <= 5; i++) await s.saveRecord(record(`c${i}`, 'sess', 'alpha'))
      await s.saveRecord(record('other', 'sess', 'beta'))
      const first = await s.listRecords('sess', 'alpha', { limit: 2 })
      expect(first.records.map((r) => r.id)).toEqual(['c5', 'c4'])
      const second = await s.listRecords('sess', 'alpha', { limit: 2, cursor: first.next_cursor! })
      expect(second.records.map((r) => r.id)).toEqual(['c3', 'c2'])
      const last = await s.listRecords('sess', 'alpha', { limit: 2, cursor: second.next_cursor! })
      expect(last.records.map((r) => r.id)).toEqual(['c1'])
      expect(last.next_cursor).toBeNull()
      expect((await s.listRecords('sess', 'beta', { limit: 10 })).records.map((r) => r.id)).toEqual(['other'])
      expect(await s.listRecords('sess', 'gamma', { limit: 10 })).toEqual({ records: [], next_cursor: null })
      await expect(s.listRecords('sess', 'alpha', { limit: 2, cursor: 'garbage' })).rejects.toThrow(InvalidCursorError)
      const recap = await s.recap('sess', 'alpha')
      expect(recap?.record.id).toBe('c5')
      expect(recap?.compactions).toBe(5)
      expect(await s.recap('sess', 'gamma')).toBeUndefined()
    })

    it("lists a key's sessions, the newest compaction's first, in pages, with their counts and figures", async () => {
      const s = open()
      const at = (minute: number): string => `2026-11-30T00:${String(minute).padStart(2, '0')}:00.000Z`
      await s.saveRecord(record('a1', 'sess-a', 'alpha', at(1)))
      await s.saveRecord(record('b1', 'sess-b', 'alpha', at(2)))
      await s.saveRecord({
        ...record('a2', 'sess-a', 'alpha', at(3)),
        stats: { ...record('x', 's', 'k').stats, raw_history_tokens: 9_000, context_after_compaction: 4_000 }
      })
      await s.saveRecord(record('c1', 'sess-c', 'alpha', at(4)))
      await s.saveRecord(record('o1', 'sess-o', 'beta', at(5)))
      await s.saveRecord({ ...record('n1', 'x', 'alpha', at(6)), session_id: null })
      const first = await s.listSessions('alpha', { limit: 2 })
      expect(first.sessions.map((x) => x.session_id)).toEqual(['sess-c', 'sess-a'])
      expect(first.sessions[1]).toEqual({
        session_id: 'sess-a',
        compactions: 2,
        first_at: at(1),
        last_at: at(3),
        last_compaction_id: 'a2',
        raw_history_tokens: 9_000,
        context_after_compaction: 4_000
      })
      const second = await s.listSessions('alpha', { limit: 2, cursor: first.next_cursor! })
      expect(second).toEqual({ sessions: [expect.objectContaining({ session_id: 'sess-b', compactions: 1 })], next_cursor: null })
      expect((await s.listSessions('beta', { limit: 10 })).sessions.map((x) => x.session_id)).toEqual(['sess-o'])
      expect(await s.listSessions('gamma', { limit: 10 })).toEqual({ sessions: [], next_cursor: null })
      await expect(s.listSessions('alpha', { limit: 2, cursor: 'garbage' })).rejects.toThrow(InvalidCursorError)
    })

    it("reads one compaction of a key's session, with its cold layer counted by kind", async () => {
      const s = open()
      await s.saveRecord(record('c1', 'sess', 'alpha'))
      await s.saveMemory({ compaction_id: 'c1', session_id: 'sess', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }, [
        { kind: 'request', text: 'fix the parser', from: 0, to: 0 },
        { kind: 'output', text: 'Traceback: boom', from: 2, to: 2 },
        { kind: 'output', text: 'ok', from: 4, to: 4 }
      ])
      const detail = await s.compaction('sess', 'alpha', 'c1')
      expect(detail?.record.id).toBe('c1')
      expect(detail?.memory).toEqual({ request: 1, output: 2 })
      expect(await s.compaction('sess', 'beta', 'c1')).toBeUndefined()
      expect(await s.compaction('other', 'alpha', 'c1')).toBeUndefined()
      expect(await s.compaction('sess', 'alpha', 'c2')).toBeUndefined()
    })

    it('keeps cached summaries until they expire, and prunes old rows', async () => {
      const s = open()
      const value = { sections: { ...emptySections(), objective: 'cached' }, model: 'm' }
      await s.putCached('k', value, 2_000)
      expect(await s.getCached('k', 1_999)).toEqual(value)
      expect(await s.getCached('k', 2_000)).toBeUndefined()
      await s.saveRecord(record('old', 's', '', '2026-01-01T00:00:00.000Z'))
      await s.saveRecord(record('new', 's', '', '2026-11-29T00:00:00.000Z'))
      expect(await s.prune(Date.parse('2026-06-01T00:00:00.000Z'), 3_000)).toEqual({ records: 1, cache: 1, memory: 0 })
      expect((await s.listRecords('s', '', { limit: 10 })).records.map((r) => r.id)).toEqual(['new'])
    })

    it("finds a session's cold-layer entries by any of the words, best first, the key's own only", async () => {
      const s = open()
      const owner = { compaction_id: 'cmp_1', session_id: 's', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }
      await s.saveMemory(owner, [
        { kind: 'ask', text: 'Rotate the signing keys before the release', from: 0, to: 0 },
        { kind: 'error', text: 'TypeError: cannot read properties of undefined (reading "keys") in src/sign.ts', from: 3, to: 4 },
        { kind: 'answer', text: 'The parser handles nested quotes now', from: 5, to: 5 }
      ])
      await s.saveMemory({ ...owner, key_name: 'beta' }, [{ kind: 'ask', text: 'signing keys of another keyName', from: 0, to: 0 }])
      const hits = await s.recall('s', 'alpha', { text: 'signing keys', limit: 5 })
      expect(hits.map((h) => h.kind)).toEqual(['ask', 'error'])
      expect(hits[0]).toMatchObject({ compaction_id: 'cmp_1', messages: [0, 0], created_at: owner.created_at })
      expect(hits[0]!.score).toBeGreaterThanOrEqual(hits[1]!.score)
      expect((await s.recall('s', 'alpha', { text: 'signing keys', limit: 5, kinds: ['error'] })).map((h) => h.kind)).toEqual(['error'])
      expect(await s.recall('s', 'alpha', { text: 'OR AND NOT " ( *', limit: 5 })).toEqual([])
      expect(await s.recall('s', 'gamma', { text: 'signing', limit: 5 })).toEqual([])
      expect((await s.prune(Date.parse('2026-12-01T00:00:00.000Z'), 0)).memory).toBe(4)
    })

    it("gives one compaction's cold-layer entries in the order written, in pages; another key's or another compaction's none", async () => {
      const s = open()
      const owner = (compaction: string): MemoryOwner => ({
        compaction_id: compaction,
        session_id: 'sess',
        key_name: 'alpha',
        created_at: '2026-11-30T00:00:00.000Z'
      })
      await s.saveMemory(
        owner('cmp_a'),
        Array.from({ length: 5 }, (_, i) => ({ kind: i % 2 ? 'command' : 'ask', text: `entry ${i} of a`, from: i, to: i + 1 }))
      )
      await s.saveMemory(owner('cmp_b'), [{ kind: 'error', text: 'entry of b', from: 0, to: 0 }])
      const first = await s.entries('sess', 'alpha', 'cmp_a', { after: 0, limit: 3 })
      expect(first.entries).toEqual([0, 1, 2].map((i) => ({ kind: i % 2 ? 'command' : 'ask', text: `entry ${i} of a`, messages: [i, i + 1] })))
      expect(first.last).not.toBeNull()
      const second = await s.entries('sess', 'alpha', 'cmp_a', { after: first.last!, limit: 3 })
      expect(second.entries.map((e) => e.text)).toEqual(['entry 3 of a', 'entry 4 of a'])
      expect(second.last).toBeNull()
      expect((await s.entries('sess', 'beta', 'cmp_a', { after: 0, limit: 10 })).entries).toEqual([])
      expect((await s.entries('sess', 'alpha', 'cmp_b', { after: 0, limit: 10 })).entries.map((e) => e.text)).toEqual(['entry of b'])
    })

    it("deletes a key's session whole (records, cold layer, its cached summaries and anchors), no one else's, and again as a no-op", async () => {
      const s = open()
      const owner = { compaction_id: 'c1', session_id: 'sess', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }
      const value = { sections: { ...emptySections(), objective: 'cached' }, model: 'm' }
      await s.saveRecord(record('c1', 'sess', 'alpha'))
      await s.saveRecord(record('c2', 'sess', 'alpha'))
      await s.saveRecord(record('b1', 'sess', 'beta'))
      await s.saveRecord(record('o1', 'other', 'alpha'))
      await s.saveMemory(owner, [
        { kind: 'ask', text: 'rotate the keys', from: 0, to: 0 },
        { kind: 'error', text: 'keys missing', from: 1, to: 1 }
      ])
      await s.saveMemory({ ...owner, key_name: 'beta', compaction_id: 'b1' }, [{ kind: 'ask', text: 'rotate the keys', from: 0, to: 0 }])
      await s.putCached('mine', value, 10_000, { key_name: 'alpha', session_id: 'sess' })
      await s.putState('anchors:mine', '{"current":null}', 10_000, { key_name: 'alpha', session_id: 'sess' })
      await s.putCached('theirs', value, 10_000, { key_name: 'beta', session_id: 'sess' })
      await s.putCached('nobody', value, 10_000)

      const deleted = await s.deleteSession('sess', 'alpha')
      expect({ ...deleted, cache_keys: [...deleted.cache_keys].sort() }).toEqual({
        compactions: 2,
        cold_layer: 2,
        cached: 2,
        cache_keys: ['anchors:mine', 'mine'],
        space_reclaimed: true
      })
      expect(await s.listRecords('sess', 'alpha', { limit: 10 })).toEqual({ records: [], next_cursor: null })
      expect(await s.recall('sess', 'alpha', { text: 'keys', limit: 5 })).toEqual([])
      expect(await s.getCached('mine', 0)).toBeUndefined()
      expect(await s.getState('anchors:mine', 0)).toBeUndefined()
      expect((await s.listSessions('alpha', { limit: 10 })).sessions.map((x) => x.session_id)).toEqual(['other'])
      // another tenant's session of the same id, and what no session owns, are untouched
      expect((await s.listRecords('sess', 'beta', { limit: 10 })).records.map((r) => r.id)).toEqual(['b1'])
      expect(await s.recall('sess', 'beta', { text: 'keys', limit: 5 })).toHaveLength(1)
      expect(await s.getCached('theirs', 0)).toEqual(value)
      expect(await s.getCached('nobody', 0)).toEqual(value)
      expect(await s.deleteSession('sess', 'alpha')).toEqual({ compactions: 0, cold_layer: 0, cached: 0, cache_keys: [], space_reclaimed: true })
    })

    it("gives a session's compactions as a chart's points, oldest first, the newest `limit` of them; the key's own only", async () => {
      const s = open()
      const at = (minute: number): string => `2026-11-30T00:${String(minute).padStart(2, '0')}:00.000Z`
      const base = record('x', 's', 'k')
      for (let i = 1; i <= 4; i++) {
        await s.saveRecord({
          ...record(`t${i}`, 'sess', 'alpha', at(i)),
          budget_tokens: i === 4 ? null : 45_000,
          stats: { ...base.stats, raw_history_tokens: 40_000 + i, context_after_compaction: 9_000 + i }
        })
      }
      await s.saveRecord({ ...record('old-style', 'sess', 'alpha', at(5)) }) // a record from before budget_tokens was kept
      await s.saveRecord(record('b1', 'sess', 'beta', at(6)))
      const points = await s.timeline('sess', 'alpha', 3)
      expect(points).toEqual([
        { compaction_id: 't3', created_at: at(3), raw_history_tokens: 40_003, context_after_compaction: 9_003, budget_tokens: 45_000 },
        { compaction_id: 't4', created_at: at(4), raw_history_tokens: 40_004, context_after_compaction: 9_004, budget_tokens: null },
        { compaction_id: 'old-style', created_at: at(5), raw_history_tokens: 1, context_after_compaction: 1, budget_tokens: null }
      ])
      expect(await s.timeline('sess', 'gamma', 10)).toEqual([])
    })

    it('says it can be written', async () => {
      await expect(open().checkWritable()).resolves.toBeUndefined()
    })
  })
}

/** Every file of a SQLite store (the database, its WAL, the records' journal) as one text, to look for bytes in. */
function sqliteFiles(path: string): string {
  return [path, `${path}-wal`, `${path}-records.journal`].map((f) => (existsSync(f) ? readFileSync(f).toString('latin1') : '')).join('\n')
}

describe('SqliteStore', () => {
  it('creates the file and its folder, in WAL mode, migrated to the current schema', async () => {
    const path = tempDb().replace('compaction.db', 'nested/deeper/c.db')
    stores.push(new SqliteStore(path))
    const db = new Database(path, { readonly: true })
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal')
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION)
    db.close()
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

  it("rewrites its journal whole or not at all, its owner's alone, and out of it goes a deleted session's record before the deletion commits", async () => {
    const path = tempDb()
    const journal = `${path}-records.journal`
    const s = new SqliteStore(path, { writer: 'inline' })
    stores.push(s)
    expect(statSync(journal).mode & 0o777).toBe(0o600)
    s.journal!({ ...record('cmp_doomed', 'doomed', 'alpha'), summary: { text: 'zqxdoomedjournalvv', sections: emptySections() } })
    s.journal!({ ...record('cmp_kept', 'kept', 'alpha'), summary: { text: 'zqxkeptjournalvv', sections: emptySections() } })
    const before = statSync(journal).ino
    // the deletion's own write fails: the record is out of the journal all the same, and no restart brings it back
    s.connection.pragma('query_only = 1')
    await expect(s.deleteSession('doomed', 'alpha')).rejects.toThrow(/readonly|read-only/i)
    const text = readFileSync(journal, 'utf8')
    expect(text).not.toContain('zqxdoomedjournalvv')
    expect(text).toContain('zqxkeptjournalvv')
    expect(statSync(journal).ino).not.toBe(before) // a new file renamed over the old
    expect(statSync(journal).mode & 0o777).toBe(0o600)
    s.connection.pragma('query_only = 0')
    await s.close()
    stores.splice(stores.indexOf(s), 1)
    const again = new SqliteStore(path)
    stores.push(again)
    expect((await again.listRecords('doomed', 'alpha', { limit: 5 })).records).toEqual([])
    expect((await again.listRecords('kept', 'alpha', { limit: 5 })).records.map((r) => r.id)).toEqual(['cmp_kept'])
  })

  it('says when it cannot be written', async () => {
    // Writes on the connection the test makes read-only (a file's writes run in a thread of their own otherwise).
    const s = new SqliteStore(tempDb(), { writer: 'inline' })
    stores.push(s)
    await expect(s.checkWritable()).resolves.toBeUndefined()
    s.connection.pragma('query_only = 1')
    await expect(s.checkWritable()).rejects.toThrow(/readonly|read-only/i)
  })

  it("writes in a thread of its own: each write is readable here once it resolves, a failed one rejects with SQLite's words, and close waits for every write asked for", async () => {
    const path = tempDb()
    const s = new SqliteStore(path)
    for (let i = 0; i < 20; i++) {
      await s.saveRecord(record(`cmp_${i}`, 'sess', 'k'))
      expect((await s.listRecords('sess', 'k', { limit: 50 })).records).toHaveLength(i + 1)
    }
    await expect(s.saveRecord(record('cmp_0', 'sess', 'k'))).rejects.toThrow(/UNIQUE constraint failed: records\.id/)
    // Room: with MAX_WRITE_BACKLOG writes or more waiting, a caller that asks for room waits until they are fewer.
    await expect(s.room()).resolves.toBeUndefined()
    const backlog = Array.from({ length: MAX_WRITE_BACKLOG + 4 }, (_, i) =>
      s.putCached(`key_${i}`, { sections: emptySections(), model: null }, Date.now() + 60_000)
    )
    let roomy = false
    const room = s.room().then(() => (roomy = true))
    await Promise.resolve()
    expect(roomy).toBe(false)
    await Promise.all(backlog)
    await room
    expect(roomy).toBe(true)
    // Asked for and not awaited: all of them are in the file after close.
    const asked = Array.from({ length: 200 }, (_, i) =>
      s.saveMemory({ compaction_id: `cmp_${i}`, session_id: 'sess', key_name: 'k', created_at: '2026-11-30T00:00:00.000Z' }, [
        { kind: 'command', text: `ran step ${i}`, from: i, to: i }
      ])
    )
    await s.close()
    await Promise.all(asked)
    const db = new Database(path, { readonly: true })
    expect(db.prepare('SELECT COUNT(*) AS n FROM cold').get()).toEqual({ n: 200 })
    expect(db.prepare('SELECT COUNT(*) AS n FROM records').get()).toEqual({ n: 20 })
    db.close()
    await expect(s.saveRecord(record('cmp_late', 'sess', 'k'))).rejects.toThrow(/thread has stopped/)
  })

  it('never writes a compaction made without a session in clear, and leaves no key of it once it is deleted or pruned', async () => {
    const path = tempDb()
    const s = new SqliteStore(path)
    stores.push(s)
    const loose = (id: string, at: string): CompactionRecord => ({
      ...record(id, 'x', 'alpha', at),
      session_id: null,
      summary: { text: `zqxloose${id}vv ${'padding words for pages '.repeat(50)}`, sections: emptySections() }
    })
    await s.saveRecord(loose('l1', '2026-11-30T00:00:00.000Z'))
    await s.saveRecord(loose('l2', '2026-01-01T00:00:00.000Z'))
    s.connection.pragma('wal_checkpoint(TRUNCATE)')
    expect(sqliteFiles(path)).not.toContain('zqxloosel1vv')
    const keys = (): number => s.connection.prepare('SELECT count(*) FROM session_keys').pluck().get() as number
    expect(keys()).toBe(2)
    await s.deleteCompaction('l1', 'alpha')
    await s.prune(Date.parse('2026-06-01T00:00:00.000Z'), 0)
    expect(keys()).toBe(0)
  })

  it('seals, at its first start, the compactions an earlier build kept in clear without a session', () => {
    const path = tempDb()
    const old = new Database(path)
    for (const [v, m] of SQLITE_MIGRATIONS.slice(0, 7).entries()) {
      if (typeof m === 'string') old.exec(m)
      else m(old)
      old.pragma(`user_version = ${v + 1}`)
    }
    const body = JSON.stringify({ ...record('cmp_old', 'x', 'alpha'), session_id: null, summary: { text: 'zqxoldloosevv' } })
    old
      .prepare('INSERT INTO records (id, owner, key_name, created_ms, raw, after, budget, body) VALUES (?, NULL, ?, ?, 1, 1, NULL, ?)')
      .run('cmp_old', 'alpha', 0, Buffer.from(body))
    old.close()
    const s = new SqliteStore(path)
    stores.push(s)
    s.connection.pragma('wal_checkpoint(TRUNCATE)')
    expect(s.connection.prepare('SELECT count(*) FROM records WHERE owner IS NULL').pluck().get()).toBe(0)
    expect(sqliteFiles(path)).not.toContain('zqxoldloosevv')
  })

  it('says when a deletion could not reclaim its space (a reader kept the WAL), retries until it has, and says so meanwhile', async () => {
    const path = tempDb()
    const s = new SqliteStore(path)
    stores.push(s)
    await s.saveRecord(record('cmp_wal', 'walled', 'alpha'))
    await s.saveMemory({ compaction_id: 'cmp_wal', session_id: 'walled', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }, [
      { kind: 'output', text: 'zqxwalled '.repeat(200), from: 0, to: 0 }
    ])
    // another connection's read transaction holds a snapshot: the WAL cannot be emptied past it
    const reader = new Database(path)
    reader.prepare('BEGIN').run()
    reader.prepare('SELECT count(*) FROM records').pluck().get()
    const first = await s.deleteSession('walled', 'alpha')
    expect(first).toMatchObject({ compactions: 1, space_reclaimed: false, reclaim_failure: expect.stringContaining('retried') })
    // a second deletion finds nothing of it, and does not claim what is still pending
    expect(await s.deleteSession('walled', 'alpha')).toMatchObject({ compactions: 0, space_reclaimed: false })
    reader.prepare('COMMIT').run()
    reader.close()
    // once the reader is gone, the retry empties the WAL, and a deletion says the space is reclaimed
    await until('the retried reclaim finished', async () => (await s.deleteSession('walled', 'alpha')).space_reclaimed)
  })

  it("never writes a session's words in clear; deleting it deletes its key (zeroed in the file, gone from the WAL), its rows, its journaled records, and gives the pages back", async () => {
    const path = tempDb()
    const s = new SqliteStore(path)
    stores.push(s)
    const secret = (n: number): string => `zqxsecret${n}vv`
    const big = (n: number): string => `${secret(n)} ${'padding words for pages '.repeat(400)}`
    const withText = (id: string, session: string, text: string): CompactionRecord => ({
      ...record(id, session, 'alpha'),
      summary: { text, sections: emptySections() }
    })
    for (let i = 0; i < 30; i++) {
      await s.saveRecord(withText(`gone-${i}`, 'doomed', big(1)))
      await s.saveMemory({ compaction_id: `gone-${i}`, session_id: 'doomed', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }, [
        { kind: 'ask', text: big(2), from: 0, to: 0 }
      ])
    }
    await s.putCached('cached-key', { sections: { ...emptySections(), objective: secret(3) }, model: 'm' }, Date.now() + 60_000, {
      key_name: 'alpha',
      session_id: 'doomed'
    })
    s.journal!(withText('gone-journaled', 'doomed', secret(4)))
    await s.saveRecord(withText('gone-journaled', 'doomed', secret(4)))
    await s.saveRecord(withText('kept', 'kept', secret(5)))
    s.journal!(withText('kept-journaled', 'kept', secret(6)))
    s.connection.pragma('wal_checkpoint(PASSIVE)') // some of it in the file, the rest still in the WAL
    await s.saveMemory({ compaction_id: 'kept', session_id: 'kept', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }, [
      { kind: 'ask', text: secret(7), from: 0, to: 0 }
    ])
    // in clear only in the journal (records answered and not yet known to be written); the rest sealed
    const before = sqliteFiles(path)
    for (const n of [4, 6]) expect(before).toContain(secret(n))
    for (const n of [1, 2, 3, 5, 7]) expect(before).not.toContain(secret(n))
    expect(readFileSync(path).toString('latin1')).not.toContain('doomed')
    const storedOf = (owner: string): Buffer => s.connection.prepare('SELECT key FROM session_keys WHERE owner = ?').pluck().get(owner) as Buffer
    const keyOf = (owner: string): Buffer => s.ring.open(owner, storedOf(owner))
    const doomedStored = storedOf(ownerOf('alpha', 'doomed'))
    const doomedKey = keyOf(ownerOf('alpha', 'doomed'))
    // what the file holds of the session opens with its key, and only with it
    const sealedCache = s.connection.prepare('SELECT value FROM cache WHERE key = ?').pluck().get('cached-key') as Buffer
    expect(unseal(doomedKey, sealedCache)).toContain(secret(3))
    expect(() => unseal(keyOf(ownerOf('alpha', 'kept')), sealedCache)).toThrow()
    const pagesBefore = s.connection.pragma('page_count', { simple: true }) as number

    const deleted = await s.deleteSession('doomed', 'alpha')
    expect(deleted).toMatchObject({ compactions: 31, cold_layer: 30, cached: 1, space_reclaimed: true })
    const after = sqliteFiles(path)
    expect(after).not.toContain(doomedStored.toString('latin1'))
    expect(after).not.toContain(secret(4))
    expect(after).toContain(secret(6)) // another session's journaled record stays journaled
    for (const table of ['records', 'cold', 'cache', 'sessions', 'session_keys']) {
      expect([table, s.connection.prepare(`SELECT count(*) FROM ${table} WHERE owner = ?`).pluck().get(ownerOf('alpha', 'doomed'))]).toEqual([table, 0])
    }
    expect(s.connection.prepare('SELECT count(*) FROM cold_terms').pluck().get()).toBe(1)
    expect((await s.listRecords('kept', 'alpha', { limit: 5 })).records.map((r) => r.summary.text)).toEqual([secret(5)])
    expect((await s.recall('kept', 'alpha', { text: secret(7), limit: 5 })).map((h) => h.text)).toEqual([secret(7)])
    expect(s.connection.pragma('page_count', { simple: true }) as number).toBeLessThan(pagesBefore / 4)
  })

  it("keeps a session's newest cold-layer entries within its cap, their terms too", async () => {
    const path = tempDb()
    const s = new SqliteStore(path, { maxSessionMemory: 20 })
    stores.push(s)
    const words = ['zebrafinchqx', 'yakhornqx', 'quokkatailqx', 'vicunahairqx', 'xeruswhiskqx']
    const owner = (i: number, session: string): MemoryOwner => ({
      compaction_id: `c${session}${i}`,
      session_id: session,
      key_name: 'alpha',
      created_at: '2026-11-30T00:00:00.000Z'
    })
    for (const [i, word] of words.entries()) {
      await s.saveMemory(
        owner(i, 'long'),
        Array.from({ length: 10 }, (_, k) => ({ kind: 'ask' as const, text: `${word} step ${k} ${'padding words '.repeat(20)}`, from: i, to: i }))
      )
    }
    await s.saveMemory(owner(0, 'other'), [{ kind: 'ask', text: 'jackalopeqx stays', from: 0, to: 0 }])
    const found = async (session: string, word: string): Promise<number> => (await s.recall(session, 'alpha', { text: word, limit: 50 })).length
    // the newest 20 kept: the last two compactions' entries
    expect(await Promise.all(words.map((w) => found('long', w)))).toEqual([0, 0, 0, 10, 10])
    expect(s.connection.prepare('SELECT COUNT(*) FROM cold WHERE owner = ?').pluck().get(ownerOf('alpha', 'long'))).toBe(20)
    expect(s.connection.prepare('SELECT COUNT(*) FROM cold_terms').pluck().get()).toBe(21)
    expect(await found('other', 'jackalopeqx')).toBe(1)
  })

  it("indexes each session's words as terms of its own: the same word in two sessions is two terms, and a search finds the asking session's entries only", async () => {
    const path = tempDb()
    const s = new SqliteStore(path)
    stores.push(s)
    const owner = (session: string, key = 'alpha'): MemoryOwner => ({
      compaction_id: `c-${session}`,
      session_id: session,
      key_name: key,
      created_at: '2026-11-30T00:00:00.000Z'
    })
    await s.saveMemory(owner('one'), [{ kind: 'error', text: 'TypeError in parser.py: failing', from: 0, to: 0 }])
    await s.saveMemory(owner('two'), [{ kind: 'error', text: 'typeerror in PARSER failed', from: 0, to: 0 }])
    await s.saveMemory(owner('one', 'beta'), [{ kind: 'error', text: 'typeerror parser', from: 0, to: 0 }])
    const db = s.connection
    db.exec('CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, cold_terms, row)')
    // typeerror, in, parser, py, failing / typeerror, in, parser, failed (fail: one stem) / typeerror, parser
    expect(db.prepare('SELECT count(*) FROM temp.vocab').pluck().get()).toBe(5 + 4 + 2)
    expect(db.prepare('SELECT max(doc) FROM temp.vocab').pluck().get()).toBe(1)
    expect((await s.recall('one', 'alpha', { text: 'fails in the parser', limit: 5 })).map((h) => h.text)).toEqual(['TypeError in parser.py: failing'])
    expect((await s.recall('two', 'alpha', { text: 'fails', limit: 5 })).map((h) => h.text)).toEqual(['typeerror in PARSER failed'])
    expect((await s.recall('one', 'beta', { text: 'failing', limit: 5 })).map((h) => h.text)).toEqual([])
  })

  it("reads in threads of its own: with this thread's connection closed, every read is still answered", async () => {
    const s = new SqliteStore(tempDb())
    stores.push(s)
    await s.saveRecord(record('cmp_t', 'sess', 'k'))
    await s.saveMemory({ compaction_id: 'cmp_t', session_id: 'sess', key_name: 'k', created_at: '2026-11-30T00:00:00.000Z' }, [
      { kind: 'ask', text: 'threaded read of the parser', from: 0, to: 0 }
    ])
    await s.putState('state-key', { anchors: 1 }, Date.now() + 60_000, { key_name: 'k', session_id: 'sess' })
    s.connection.close() // (the main thread's connection is for migrations, the journal and tests)
    expect((await s.listRecords('sess', 'k', { limit: 5 })).records.map((r) => r.id)).toEqual(['cmp_t'])
    expect((await s.listSessions('k', { limit: 5 })).sessions.map((x) => x.session_id)).toEqual(['sess'])
    expect((await s.recall('sess', 'k', { text: 'parser', limit: 5 })).map((h) => h.text)).toEqual(['threaded read of the parser'])
    expect(await s.getState('state-key', Date.now())).toEqual({ anchors: 1 })
    expect(await s.recap('sess', 'k')).toMatchObject({ compactions: 1 })
    expect(await s.timeline('sess', 'k', 5)).toHaveLength(1)
  })

  it('keeps a journaled record through a stop before its write, and writes it at the next start, once', async () => {
    const path = tempDb()
    const first = new SqliteStore(path)
    first.journal!(record('cmp_journaled', 'sess', 'k'))
    await first.saveRecord(record('cmp_written', 'sess', 'k'))
    first.journal!(record('cmp_written', 'sess', 'k')) // journaled after its write: replayed as nothing new
    await first.close() // the journaled record's write never asked for, as when the process is killed
    for (let start = 0; start < 2; start++) {
      const again = new SqliteStore(path)
      expect((await again.listRecords('sess', 'k', { limit: 10 })).records.map((r) => r.id).sort()).toEqual(['cmp_journaled', 'cmp_written'])
      await again.close()
    }
    expect(new SqliteStore(':memory:').journal).toBeUndefined()
  })
})

describe.skipIf(pgMissing !== undefined)(`PostgresStore${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, () => {
  it('migrates once when replicas start together, under the advisory lock', async () => {
    const url = freshPgUrl()
    const replicas = Array.from({ length: 4 }, () => new PostgresStore(url))
    stores.push(...replicas)
    await Promise.all(replicas.map((r) => r.checkWritable()))
    const schema = new URL(url).searchParams.get('schema')!
    const client = new pg.Client({ connectionString: PG_URL })
    await client.connect()
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`)
    await client.end()
    expect(rows.map((r) => r.version)).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1))
  })

  it("never writes a session's words in clear; deleting it deletes its key from every page (the keys' table rewritten), its rows and its list row", async (context) => {
    const url = freshPgUrl()
    const s = new PostgresStore(url)
    stores.push(s)
    const schema = new URL(url).searchParams.get('schema')!
    const client = new pg.Client({ connectionString: PG_URL })
    await client.connect()
    try {
      // pages are read raw with pageinspect (a superuser's extension, in PostgreSQL's contrib)
      const inspect = await client.query('CREATE EXTENSION IF NOT EXISTS pageinspect').catch((err: Error) => err)
      if (inspect instanceof Error) return context.skip(`pageinspect cannot be used here (${inspect.message})`)
      const secret = (n: number): string => `zqxsecret${n}vv`
      const owner = { compaction_id: 'c', session_id: 'doomed', key_name: 'alpha', created_at: '2026-11-30T00:00:00.000Z' }
      for (let i = 0; i < 20; i++) {
        await s.saveRecord({ ...record(`gone-${i}`, 'doomed', 'alpha'), summary: { text: secret(1), sections: emptySections() } })
        await s.saveMemory({ ...owner, compaction_id: `gone-${i}` }, [{ kind: 'ask', text: `${secret(2)} ${'a word '.repeat(i * 100)}`, from: 0, to: 0 }])
      }
      await s.putCached('cached-key', { sections: { ...emptySections(), objective: secret(3) }, model: 'm' }, Date.now() + 60_000, {
        key_name: 'alpha',
        session_id: 'doomed'
      })
      await s.saveRecord({ ...record('kept', 'kept', 'alpha'), summary: { text: secret(5), sections: emptySections() } })
      await client.query('CHECKPOINT')
      const pagesHolding = async (bytes: Buffer): Promise<number> => {
        const { rows } = await client.query<{ n: string }>(
          `WITH rels AS (
             SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
             UNION SELECT t.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid WHERE n.nspname = $1
             UNION SELECT i.indexrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_index i ON i.indrelid = c.reltoastrelid WHERE n.nspname = $1)
           SELECT count(*) AS n FROM rels, generate_series(0, pg_relation_size(rels.oid) / 8192 - 1) AS b
            WHERE position($2::bytea IN get_raw_page(rels.oid::regclass::text, b::int)) > 0`,
          [schema, bytes]
        )
        return Number(rows[0]!.n)
      }
      for (const text of [secret(1), secret(2), secret(3), secret(5), 'doomed']) expect([text, await pagesHolding(Buffer.from(text))]).toEqual([text, 0])
      const { rows } = await client.query<{ key: Buffer }>(`SELECT key FROM ${schema}.session_keys WHERE owner = $1`, [ownerOf('alpha', 'doomed')])
      const key = rows[0]!.key
      expect(await pagesHolding(key)).toBeGreaterThan(0)
      const deleted = await s.deleteSession('doomed', 'alpha')
      expect(deleted).toMatchObject({ compactions: 20, cold_layer: 20, cached: 1 })
      // the keys' part is rewritten at once, or, where the rewrite could not be made then (it says why), retried
      // until it is: a later deletion says so once it has been (as the SQLite store's WAL is retried)
      if (!deleted.space_reclaimed) {
        expect(deleted.reclaim_failure).toMatch(/retried until it is done$/)
        await until("the deleted key's part rewritten", async () => (await s.deleteSession('doomed', 'alpha')).space_reclaimed)
      }
      await client.query('CHECKPOINT')
      expect(await pagesHolding(key)).toBe(0)
      for (const table of ['records', 'cold', 'cache', 'sessions', 'session_keys']) {
        const left = await client.query(`SELECT count(*)::int AS n FROM ${schema}.${table} WHERE owner = $1`, [ownerOf('alpha', 'doomed')])
        expect([table, left.rows[0].n]).toEqual([table, 0])
      }
      expect((await s.listRecords('kept', 'alpha', { limit: 5 })).records.map((r) => r.summary.text)).toEqual([secret(5)])
    } finally {
      await client.end()
    }
  })

  it("prunes the cold layer's days wholly past retention by dropping their tables (the bytes go back at once), the day of the cutoff row by row", async () => {
    const url = freshPgUrl()
    const s = new PostgresStore(url)
    stores.push(s)
    const schema = new URL(url).searchParams.get('schema')!
    const now = Date.parse('2026-12-03T12:00:00.000Z')
    const entry = (session: string, at: number, text: string) =>
      s.saveMemory({ compaction_id: `c-${at}`, session_id: session, key_name: 'alpha', created_at: new Date(at).toISOString() }, [
        { kind: 'ask', text, from: 0, to: 0 }
      ])
    await entry('old', now - 40 * 86_400_000, 'forty days old')
    await entry('old', now - 30 * 86_400_000 - 3_600_000, 'just past the cutoff')
    await entry('old', now - 30 * 86_400_000 + 3_600_000, 'just within it')
    await entry('new', now, 'today')
    const client = new pg.Client({ connectionString: PG_URL })
    await client.connect()
    const tables = async (): Promise<string[]> =>
      (
        await client.query<{ t: string }>("SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'cold_%' ORDER BY 1", [schema])
      ).rows.map((r) => r.t)
    try {
      expect(await tables()).toEqual([coldDay(now - 40 * 86_400_000).name, coldDay(now - 30 * 86_400_000 - 3_600_000).name, coldDay(now).name].sort())
      const pruned = await s.prune(now - 30 * 86_400_000, now)
      expect(pruned.memory).toBe(2)
      // the 40-day-old table is gone; the cutoff's day keeps what is within; tomorrow's is made ahead
      expect(await tables()).toEqual([coldDay(now - 30 * 86_400_000).name, coldDay(now).name, coldDay(now + 86_400_000).name].sort())
      expect((await s.recall('old', 'alpha', { text: 'days cutoff within', limit: 5 })).map((h) => h.text)).toEqual(['just within it'])
      expect((await s.recall('new', 'alpha', { text: 'today', limit: 5 })).map((h) => h.text)).toEqual(['today'])
      await entry('old', now - 40 * 86_400_000, 'late write of an old day') // its table made again
      expect((await s.recall('old', 'alpha', { text: 'late write', limit: 5 })).map((h) => h.text)).toEqual(['late write of an old day'])
    } finally {
      await client.end()
    }
  })

  it('refuses a schema newer than it knows', async () => {
    const url = freshPgUrl()
    const first = new PostgresStore(url)
    stores.push(first)
    await first.checkWritable()
    const schema = new URL(url).searchParams.get('schema')!
    const client = new pg.Client({ connectionString: PG_URL })
    await client.connect()
    await client.query(`INSERT INTO ${schema}.schema_migrations (version) VALUES (${PG_SCHEMA_VERSION + 1})`)
    await client.end()
    const later = new PostgresStore(url)
    stores.push(later)
    await expect(later.checkWritable()).rejects.toThrow(/newer than this build knows/)
  })

  it('fails fast while the database is unreachable, and names it without its password', async () => {
    const s = new PostgresStore('postgres://gateway:s3cret@127.0.0.1:9/none')
    stores.push(s)
    const err = await s.checkWritable().catch((e: unknown) => e as Error)
    expect(String(err)).toMatch(/cannot migrate postgres:\/\/gateway:\*\*\*@127\.0\.0\.1:9\/none/)
    expect(String(err)).not.toContain('s3cret')
  })
})

/** A store of the schema before sessions were sealed, with a session's record, entries and cached row in clear. */
const OLD_RECORD = (id: string, session: string | null): CompactionRecord => ({
  ...record(id, session ?? 'x', 'alpha'),
  session_id: session,
  summary: { text: `summary of ${id} zqxoldsecret`, sections: emptySections() }
})

describe('a store made before sessions were sealed', () => {
  it('SQLite: moves every row over at start, sealed, readable as before, and leaves none of its words in clear', async () => {
    const path = tempDb()
    const old = new Database(path)
    old.pragma('auto_vacuum = INCREMENTAL')
    old.pragma('journal_mode = WAL')
    for (const m of SQLITE_MIGRATIONS.slice(0, 4)) old.exec(m as string)
    old.pragma('user_version = 4')
    const insert = old.prepare('INSERT INTO compactions (id, session_id, key_name, created_at, created_ms, record) VALUES (?, ?, ?, ?, ?, ?)')
    for (const [id, session] of [
      ['cmp_1', 'sess'],
      ['cmp_2', 'sess'],
      ['cmp_3', null]
    ] as const) {
      const r = OLD_RECORD(id, session)
      insert.run(id, session, 'alpha', r.created_at, Date.parse(r.created_at), JSON.stringify({ ...r, summary: { text: r.summary.text } }))
    }
    old
      .prepare(
        'INSERT INTO memory (key_name, session_id, compaction_id, kind, text, msg_from, msg_to, created_at, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)'
      )
      .run('alpha', 'sess', 'cmp_1', 'error', 'zqxoldsecret: parser failed', 3, 4, '2026-11-30T00:00:00.000Z', Date.parse('2026-11-30T00:00:00.000Z'))
    old
      .prepare('INSERT INTO summary_cache (key, value, expires_ms, key_name, session_id) VALUES (?, ?, ?, ?, ?)')
      .run('k1', JSON.stringify({ sections: emptySections(), model: 'zqxoldsecret' }), Date.now() + 60_000, 'alpha', 'sess')
    old.close()

    const s = new SqliteStore(path)
    stores.push(s)
    expect(s.connection.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION)
    expect((await s.listRecords('sess', 'alpha', { limit: 5 })).records.map((r) => r.id)).toEqual(['cmp_2', 'cmp_1'])
    expect((await s.listSessions('alpha', { limit: 5 })).sessions).toMatchObject([{ session_id: 'sess', compactions: 2, last_compaction_id: 'cmp_2' }])
    expect((await s.recall('sess', 'alpha', { text: 'failing parsers', limit: 5 })).map((h) => [h.text, h.messages])).toEqual([
      ['zqxoldsecret: parser failed', [3, 4]]
    ])
    expect(await s.getCached('k1', Date.now())).toEqual({ sections: emptySections(), model: 'zqxoldsecret' })
    expect(await s.recap('sess', 'alpha')).toMatchObject({ compactions: 2, record: { id: 'cmp_2' } })
    s.connection.pragma('wal_checkpoint(TRUNCATE)')
    expect(readFileSync(path).toString('latin1')).not.toContain('zqxoldsecret: parser')
    await s.saveRecord(record('cmp_4', 'sess', 'alpha'))
    expect((await s.listRecords('sess', 'alpha', { limit: 1 })).records.map((r) => r.id)).toEqual(['cmp_4'])
  })

  it.skipIf(pgMissing !== undefined)(
    `PostgreSQL: moves every row over at the migration, sealed, readable as before${pgMissing ? ` (skipped: ${pgMissing})` : ''}`,
    async () => {
      const url = freshPgUrl()
      const schema = new URL(url).searchParams.get('schema')!
      const client = new pg.Client({ connectionString: PG_URL })
      await client.connect()
      try {
        await client.query(`CREATE SCHEMA ${schema}; SET search_path = ${schema}`)
        await client.query('CREATE TABLE schema_migrations (version INT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
        for (const [i, m] of PG_MIGRATIONS.slice(0, 2).entries()) {
          await client.query(m as string)
          await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [i + 1])
        }
        for (const [id, session] of [
          ['cmp_1', 'sess'],
          ['cmp_2', 'sess'],
          ['cmp_3', null]
        ] as const) {
          const r = OLD_RECORD(id, session)
          await client.query('INSERT INTO compactions (id, session_id, key_name, created_at, created_ms, record) VALUES ($1, $2, $3, $4, $5, $6)', [
            id,
            session,
            'alpha',
            r.created_at,
            Date.parse(r.created_at),
            JSON.stringify({ ...r, summary: { text: r.summary.text } })
          ])
        }
        await client.query(
          'INSERT INTO memory (key_name, session_id, compaction_id, kind, text, msg_from, msg_to, created_at, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
          ['alpha', 'sess', 'cmp_1', 'error', 'zqxoldsecret: parser failed', 3, 4, '2026-11-30T00:00:00.000Z', Date.parse('2026-11-30T00:00:00.000Z')]
        )
        await client.query('INSERT INTO summary_cache (key, value, expires_ms, key_name, session_id) VALUES ($1, $2, $3, $4, $5)', [
          'k1',
          JSON.stringify({ sections: emptySections(), model: 'zqxoldsecret' }),
          Date.now() + 60_000,
          'alpha',
          'sess'
        ])
      } finally {
        await client.end()
      }
      const s = new PostgresStore(url)
      stores.push(s)
      expect((await s.listRecords('sess', 'alpha', { limit: 5 })).records.map((r) => r.id)).toEqual(['cmp_2', 'cmp_1'])
      expect((await s.listSessions('alpha', { limit: 5 })).sessions).toMatchObject([{ session_id: 'sess', compactions: 2, last_compaction_id: 'cmp_2' }])
      expect((await s.recall('sess', 'alpha', { text: 'failing parsers', limit: 5 })).map((h) => [h.text, h.messages])).toEqual([
        ['zqxoldsecret: parser failed', [3, 4]]
      ])
      expect(await s.getCached('k1', Date.now())).toEqual({ sections: emptySections(), model: 'zqxoldsecret' })
      await s.saveRecord(record('cmp_4', 'sess', 'alpha'))
      expect((await s.listRecords('sess', 'alpha', { limit: 1 })).records.map((r) => r.id)).toEqual(['cmp_4'])
    }
  )
})
