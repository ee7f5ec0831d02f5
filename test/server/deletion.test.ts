import { existsSync, readFileSync } from 'node:fs'
import pg from 'pg'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import { ownerOf } from '../../src/storage/sealing.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { type ServerProcess, startServer, tempDb } from '../helpers/process.js'
import { PG_URL, REDIS_URL, dropSchemas, freshPgUrl, freshRedisPrefix, pgMissing, redisMissing } from '../helpers/services.js'

/**
 * Deleting a session through a real process: what its compactions, the proxy and the summary cache kept
 * of it is gone from the bytes of the store (SQLite's files, WAL included; PostgreSQL's pages) and from
 * Redis, and another key can neither see nor delete it.
 */
const ALICE = 'key-alice-000000000001'
const BOB = 'key-bob-000000000000002'
const KEYS = `alice=${ALICE},bob=${BOB}`
const SECRET = 'zqxsecret1vv'
const MODEL_SECRET = 'zqxsecret2vv'
const KEPT = 'zqxkept3vv'

let fake: FakeAnthropic
beforeAll(async () => {
  fake = await new FakeAnthropic().start()
  // the model's summary repeats the session's words: the summary cache and the records hold them too
  fake.fallback = { toolInput: { objective: `Ship the ${MODEL_SECRET} release` } }
})
afterAll(async () => {
  await fake.close()
  if (!pgMissing) await dropSchemas()
})

/** A session's history whose old turns hold `word` (where a summary and the cold layer read it). */
function history(word: string, steps = 12): Message[] {
  const messages: Message[] = [user(`Fix the ${word} importer; the customer's file is attached`)]
  for (let i = 0; i < steps; i++)
    messages.push(...shellStep(`toolu_${word}_${i}`, `grep -rn ${word} src/`, `src/import.ts:${i}: ${word} ${'row data '.repeat(60)}`))
  messages.push(assistant(`Done with ${word}.`), user('Now run the tests'))
  return messages
}

/** The fields of the answers this test reads. */
interface Answer {
  summarizer: { kind: string }
  summary: { id: string }
  sessions: { session_id: string }[]
  compactions: unknown[]
  results: unknown[]
  deleted: { compactions: number; cold_layer: number; cached: number; conversations: number }
  space_reclaimed: boolean
}

async function call(
  server: ServerProcess,
  method: string,
  path: string,
  key: string,
  body?: unknown,
  headers: Record<string, string> = {}
): Promise<{ status: number; json: Answer; compaction: string | null }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body ? { body: JSON.stringify(body) } : {})
  })
  const text = await res.text()
  return { status: res.status, json: (text ? JSON.parse(text) : {}) as Answer, compaction: res.headers.get('x-compaction') }
}

/** Fills a session from both doors (a compaction with the model, a proxied request with anchors), deletes it, and checks what the API says after. */
async function fillAndDelete(server: ServerProcess): Promise<void> {
  const compacted = await call(server, 'POST', '/v1/compact', ALICE, { messages: history(SECRET), mode: 'manual', session_id: 'doomed' })
  expect(compacted.status).toBe(200)
  expect(compacted.json.summarizer.kind).toBe('anthropic')
  const proxied = await call(
    server,
    'POST',
    '/v1/messages',
    ALICE,
    { model: 'claude-test', max_tokens: 64, messages: history(SECRET, 60) },
    { 'x-compaction-session': 'doomed', 'x-compaction-budget': '6000', 'anthropic-version': '2023-06-01' }
  )
  expect(proxied.status).toBe(200)
  expect(proxied.compaction).toBe('compacted')
  expect(
    (await call(server, 'POST', '/v1/compact', ALICE, { messages: history(KEPT), mode: 'manual', session_id: 'kept', summarizer: 'extractive' })).status
  ).toBe(200)

  // another key: nothing to see, nothing deleted
  expect((await call(server, 'GET', '/v1/sessions', BOB)).json.sessions).toEqual([])
  expect((await call(server, 'GET', '/v1/sessions/doomed/compactions', BOB)).json.compactions).toEqual([])
  expect((await call(server, 'GET', `/v1/sessions/doomed/compactions/${compacted.json.summary.id}`, BOB)).status).toBe(404)
  const bobs = await call(server, 'DELETE', '/v1/sessions/doomed', BOB)
  expect(bobs).toMatchObject({
    status: 200,
    json: { session_id: 'doomed', deleted: { compactions: 0, cold_layer: 0, cached: 0, conversations: 0 }, space_reclaimed: true }
  })
  expect((await call(server, 'GET', '/v1/sessions/doomed/compactions', ALICE)).json.compactions).toHaveLength(2)

  expect((await call(server, 'POST', '/v1/sessions/doomed/recall', ALICE, { query: SECRET })).json.results.length).toBeGreaterThan(0)
  const deleted = await call(server, 'DELETE', '/v1/sessions/doomed', ALICE)
  expect(deleted.status).toBe(200)
  expect(deleted.json.space_reclaimed).toBe(true)
  expect(deleted.json.deleted.compactions).toBe(2)
  expect(deleted.json.deleted.cold_layer).toBeGreaterThan(0)
  expect(deleted.json.deleted.cached).toBeGreaterThanOrEqual(2) // the model's summary and the proxy's anchors
  expect(deleted.json.deleted.conversations).toBe(1)
  expect((await call(server, 'GET', '/v1/sessions', ALICE)).json.sessions.map((s) => s.session_id)).toEqual(['kept'])
  expect((await call(server, 'GET', '/v1/sessions/doomed/compactions', ALICE)).json.compactions).toEqual([])
  expect((await call(server, 'POST', '/v1/sessions/doomed/recall', ALICE, { query: SECRET })).json.results).toEqual([])
  expect((await call(server, 'DELETE', '/v1/sessions/doomed', ALICE)).json.deleted).toEqual({ compactions: 0, cold_layer: 0, cached: 0, conversations: 0 })
}

describe('DELETE /v1/sessions/{id} in a real process on SQLite', () => {
  it("leaves none of the session's bytes in the database file, its WAL or the records' journal; another key's delete is a no-op", async () => {
    const db = tempDb()
    const server = await startServer({
      COMPACT_DB: db,
      COMPACT_API_KEYS: KEYS,
      ANTHROPIC_API_KEY: 'sk-ant-test-delete-000000000',
      ANTHROPIC_BASE_URL: fake.url
    })
    try {
      await fillAndDelete(server)
      const read = (files: string[]): string => files.map((f) => (existsSync(f) ? readFileSync(f).toString('latin1') : '')).join('\n')
      const bytes = read([db, `${db}-wal`, `${db}-records.journal`])
      // the other session is still there (listed above), and sealed: its words are in no page in clear
      expect(read([db, `${db}-wal`])).not.toContain(KEPT)
      for (const gone of [SECRET, MODEL_SECRET, 'doomed']) expect([gone, bytes.includes(gone)]).toEqual([gone, false])
      // the cached summary went with it: the same compaction asks the model again
      const calls = fake.requests.length
      expect((await call(server, 'POST', '/v1/compact', ALICE, { messages: history(SECRET), mode: 'manual', session_id: 'doomed' })).json.summarizer.kind).toBe(
        'anthropic'
      )
      expect(fake.requests.length).toBe(calls + 1)
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
    }
  })
})

const missing = pgMissing ?? redisMissing
describe.skipIf(missing !== undefined)(`DELETE /v1/sessions/{id} in a real process on PostgreSQL and Redis${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it("leaves none of the session's bytes in PostgreSQL's pages nor anything of it in Redis", async () => {
    const url = freshPgUrl()
    const prefix = freshRedisPrefix()
    const server = await startServer({
      COMPACT_DB: url,
      COMPACT_REDIS_URL: `${REDIS_URL}?prefix=${prefix}`,
      COMPACT_API_KEYS: KEYS,
      ANTHROPIC_API_KEY: 'sk-ant-test-delete-000000000',
      ANTHROPIC_BASE_URL: fake.url
    })
    const client = new pg.Client({ connectionString: PG_URL })
    const redis = new Redis(REDIS_URL)
    await client.connect()
    try {
      await fillAndDelete(server)
      const schema = new URL(url).searchParams.get('schema')!
      const inspect = await client.query('CREATE EXTENSION IF NOT EXISTS pageinspect').catch((err: Error) => err)
      if (!(inspect instanceof Error)) {
        const pages = async (text: string): Promise<number> => {
          const { rows } = await client.query<{ n: string }>(
            `WITH rels AS (
               SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
               UNION SELECT t.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid WHERE n.nspname = $1)
             SELECT count(*) AS n FROM rels, generate_series(0, pg_relation_size(rels.oid) / 8192 - 1) AS b
              WHERE position(convert_to($2, 'UTF8') IN get_raw_page(rels.oid::regclass::text, b::int)) > 0`,
            [schema, text]
          )
          return Number(rows[0]!.n)
        }
        // the other session is still there (listed above), and sealed: its words are in no page in clear
        for (const gone of [KEPT, SECRET, MODEL_SECRET, 'doomed']) expect([gone, await pages(gone)]).toEqual([gone, 0])
      } else {
        console.warn(`pages not read: pageinspect cannot be used here (${inspect.message})`)
      }
      const owner = ownerOf('alice', 'doomed')
      const { rows } = await client.query(
        `SELECT 1 FROM ${schema}.records WHERE owner = $1 UNION ALL SELECT 1 FROM ${schema}.cold WHERE owner = $1 UNION ALL SELECT 1 FROM ${schema}.cache WHERE owner = $1
         UNION ALL SELECT 1 FROM ${schema}.sessions WHERE owner = $1 UNION ALL SELECT 1 FROM ${schema}.session_keys WHERE owner = $1`,
        [owner]
      )
      expect(rows).toEqual([])
      expect((await client.query(`SELECT count(*)::int AS n FROM ${schema}.session_keys`)).rows[0].n).toBe(1) // the kept session's
      // Redis: no key of this deployment names the session or holds its words
      const keys = await redis.keys(`${prefix}*`)
      for (const key of keys) {
        const value = (await redis.type(key)) === 'string' ? ((await redis.get(key)) ?? '') : ''
        for (const gone of [SECRET, MODEL_SECRET, 'doomed']) expect(`${key} ${value}`).not.toContain(gone)
      }
    } finally {
      redis.disconnect()
      await client.end()
      server.child.kill('SIGTERM')
      await server.exited
    }
  })
})
