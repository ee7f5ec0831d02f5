import { appendFileSync } from 'node:fs'
import Database from 'better-sqlite3'
import pg from 'pg'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { ownerOf } from '../../src/storage/sealing.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { emptySections } from '../../src/compaction/index.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { tempDb } from '../helpers/process.js'
import { dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'
import { parsePostgresUrl } from '../../src/storage/postgres.js'
import { until } from '../helpers/wait.js'

/**
 * A deletion is final: work begun for a session before its `DELETE` (a compaction whose model answers after
 * it, on this replica or another) writes nothing of it afterwards, and a journal replayed after a kill brings
 * nothing of it back. Every read of the session then finds nothing, and the store holds no row of it; a
 * compaction begun after the deletion is a new session's, and is kept.
 */
const KEY = 'key-races-0000000000001'
const CANARY = 'zqxcanary9race'
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})
afterAll(async () => {
  if (!pgMissing) await dropSchemas()
})

function history(): Message[] {
  const messages: Message[] = [user(`Fix the ${CANARY} importer`)]
  for (let i = 0; i < 10; i++) messages.push(...shellStep(`toolu_race_${i}`, `grep -rn ${CANARY} src/`, `src/a.ts:${i}: ${CANARY} ${'row '.repeat(80)}`))
  messages.push(assistant('Done.'), user('Now run the tests'))
  return messages
}

async function gateway(fake: FakeAnthropic, db: string): Promise<App> {
  const app = await testApp({ COMPACT_DB: db, COMPACT_API_KEYS: `races=${KEY}`, ANTHROPIC_API_KEY: 'sk-ant-races-00000000000', ANTHROPIC_BASE_URL: fake.url })
  opened.push(app)
  return app
}

/** Every read of the session on `app`: its compactions, recall, recap, the list. */
async function everything(app: App, session: string): Promise<unknown[]> {
  const get = async (method: 'GET' | 'POST', url: string, payload?: unknown): Promise<unknown> =>
    (await app.inject({ method, url, headers: { 'x-api-key': KEY }, ...(payload ? { payload } : {}) })).json()
  const compactions = (await get('GET', `/v1/sessions/${session}/compactions`)) as { compactions: unknown[] }
  const recall = (await get('POST', `/v1/sessions/${session}/recall`, { query: CANARY })) as { results: unknown[] }
  const sessions = (await get('GET', '/v1/sessions')) as { sessions: { session_id: string }[] }
  const recap = await app.inject({ method: 'GET', url: `/v1/sessions/${session}/recap`, headers: { 'x-api-key': KEY } })
  return [
    ...compactions.compactions,
    ...recall.results,
    ...sessions.sessions.filter((s) => s.session_id === session),
    ...(recap.statusCode === 200 ? [recap.json()] : [])
  ]
}

/** A compaction of `session` on `app` whose model answers once `gate` is opened; resolves with its status. */
function compactBehindGate(app: App, fake: FakeAnthropic, session: string): { answered: Promise<number>; open: () => void } {
  let open: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (open = resolve))
  fake.reply({ toolInput: { objective: `Ship the ${CANARY} importer` }, after: gate })
  const answered = app
    .inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': KEY }, payload: { messages: history(), mode: 'manual', session_id: session } })
    .then((r) => r.statusCode)
  return { answered, open }
}

describe('a deletion racing the writes of work begun before it (SQLite)', () => {
  it('a compaction whose model answers after the DELETE is answered, and keeps nothing of the session; one begun after is kept', async () => {
    const fake = await new FakeAnthropic().start()
    opened.push(fake)
    const db = tempDb()
    const app = await gateway(fake, db)
    const before = fake.requests.length
    const { answered, open } = compactBehindGate(app, fake, 'doomed')
    await until('the summary model was called', () => fake.requests.length > before)
    const deleted = await app.inject({ method: 'DELETE', url: '/v1/sessions/doomed', headers: { 'x-api-key': KEY } })
    expect(deleted.statusCode).toBe(200)
    open()
    expect(await answered).toBe(200)
    await app.store.drain()
    expect(await everything(app, 'doomed')).toEqual([])
    // a compaction begun after the deletion is a new session's
    fake.fallback = { toolInput: { objective: 'Ship it again' } }
    const again = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'x-api-key': KEY },
      payload: { messages: history(), mode: 'manual', session_id: 'doomed' }
    })
    expect(again.statusCode).toBe(200)
    await app.store.drain()
    expect(
      ((await app.inject({ method: 'GET', url: '/v1/sessions/doomed/compactions', headers: { 'x-api-key': KEY } })).json() as { compactions: unknown[] })
        .compactions
    ).toHaveLength(1)
  })

  it('leaves no row of the session in the file when the late compaction lands, and a journal replayed after a kill brings nothing of it back', async () => {
    const fake = await new FakeAnthropic().start()
    opened.push(fake)
    const db = tempDb()
    const app = await gateway(fake, db)
    const { answered, open } = compactBehindGate(app, fake, 'doomed')
    await until('the summary model was called', () => fake.requests.length > 0)
    expect((await app.inject({ method: 'DELETE', url: '/v1/sessions/doomed', headers: { 'x-api-key': KEY } })).statusCode).toBe(200)
    open()
    expect(await answered).toBe(200)
    await app.store.drain()
    await app.close()
    opened.splice(opened.indexOf(app), 1)
    const owner = ownerOf('races', 'doomed')
    const file = new Database(db, { readonly: true })
    for (const table of ['records', 'cold', 'cache', 'sessions', 'session_keys'])
      expect([table, file.prepare(`SELECT count(*) FROM ${table} WHERE owner = ?`).pluck().get(owner)]).toEqual([table, 0])
    expect(file.prepare('SELECT count(*) FROM tombstones WHERE owner = ?').pluck().get(owner)).toBe(1)
    file.close()
    // a kill between the deletion's commit and the journal's rewrite: the journal still holds a record of it
    const record = {
      id: 'cmp_before_the_kill',
      session_id: 'doomed',
      key_name: 'races',
      created_at: new Date(Date.now() - 60_000).toISOString(),
      mode: 'manual',
      reason: 'manual',
      stats: { raw_history_tokens: 1, context_after_compaction: 1 },
      summary: { text: CANARY, sections: emptySections() }
    }
    appendFileSync(`${db}-records.journal`, `${JSON.stringify(record)}\n`)
    const reopened = new SqliteStore(db)
    opened.push(reopened)
    expect((await reopened.listRecords('doomed', 'races', { limit: 5 })).records).toEqual([])
  })
})

describe.skipIf(pgMissing !== undefined)(`a deletion racing another replica's work (PostgreSQL)${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, () => {
  it('a compaction another replica finishes after the DELETE keeps nothing there: every read on both replicas is empty, no row of it is left', async () => {
    const fake = await new FakeAnthropic().start()
    opened.push(fake)
    const url = freshPgUrl()
    const a = await gateway(fake, url)
    const b = await gateway(fake, url)
    const { answered, open } = compactBehindGate(b, fake, 'doomed')
    await until('the summary model was called', () => fake.requests.length > 0)
    expect((await a.inject({ method: 'DELETE', url: '/v1/sessions/doomed', headers: { 'x-api-key': KEY } })).statusCode).toBe(200)
    open()
    expect(await answered).toBe(200)
    await b.store.drain()
    expect(await everything(a, 'doomed')).toEqual([])
    expect(await everything(b, 'doomed')).toEqual([])
    const { connectionString, schema } = parsePostgresUrl(url)
    const client = new pg.Client({ connectionString, options: `-c search_path=${schema}` })
    await client.connect()
    try {
      const owner = ownerOf('races', 'doomed')
      for (const table of ['records', 'cold', 'cache', 'sessions', 'session_keys'])
        expect([table, Number((await client.query(`SELECT count(*) AS n FROM ${table} WHERE owner = $1`, [owner])).rows[0].n)]).toEqual([table, 0])
    } finally {
      await client.end()
    }
  })
})
