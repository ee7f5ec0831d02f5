import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { StoreError } from '../../src/storage/store.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { responseValidator } from '../helpers/openapi.js'
import { runToExit, tempDb } from '../helpers/process.js'

const KEYS = 'alice=key-alice-000000000001,bob=key-bob-000000000000002'
const history = (n = 0) => ({ messages: [user(`fix bug ${n}`), assistant('looking'), user('and?')], mode: 'manual', session_id: 'sess-1' })
const check = responseValidator()

let fake: FakeAnthropic
beforeAll(async () => {
  fake = await new FakeAnthropic().start()
})
afterAll(async () => {
  await fake.close()
})
beforeEach(() => {
  fake.requests.length = 0
  fake.fallback = { toolInput: { objective: 'cached objective' } }
})
const modelEnv = () => ({ ANTHROPIC_API_KEY: 'sk-ant-test-cache-000000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_API_KEYS: KEYS })
const post = (app: App, key: string, body: object) => app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': key }, payload: body })

describe('the summary cache', () => {
  it('answers a retried compaction from the store, with no second model call', async () => {
    const app = await testApp({ ...modelEnv(), COMPACT_DB: tempDb() })
    const first = (await post(app, 'key-alice-000000000001', history())).json()
    const retry = (await post(app, 'key-alice-000000000001', history())).json()
    expect(fake.requests).toHaveLength(1)
    expect(first.summarizer).toMatchObject({ kind: 'anthropic', calls: 1 })
    expect(retry.summarizer).toMatchObject({ kind: 'cache', calls: 0, input_tokens: 0, model: 'claude-sonnet-5-5' })
    expect(retry.summary.sections).toEqual(first.summary.sections)
    expect(retry.summary.id).not.toBe(first.summary.id)
    expect(check('POST', '/v1/compact', 200, retry)).toEqual([])
    await app.close()
  })

  it('makes one model call for four identical requests in flight at once', async () => {
    fake.fallback = { delayMs: 300, toolInput: { objective: 'shared' } }
    const app = await testApp({ ...modelEnv() })
    const answers = await Promise.all([1, 2, 3, 4].map(() => post(app, 'key-alice-000000000001', history(7))))
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200])
    expect(fake.requests).toHaveLength(1)
    const kinds = answers.map((a) => a.json().summarizer.kind).sort()
    expect(kinds).toEqual(['anthropic', 'cache', 'cache', 'cache'])
    for (const a of answers) expect(a.json().summary.sections.objective).toBe('shared')
    await app.close()
  })

  it('is never shared across keys, and changes with the instructions', async () => {
    const app = await testApp({ ...modelEnv() })
    await post(app, 'key-alice-000000000001', history(9))
    await post(app, 'key-bob-000000000000002', history(9))
    await post(app, 'key-alice-000000000001', { ...history(9), instructions: 'focus on the parser' })
    expect(fake.requests).toHaveLength(3)
    await app.close()
  })

  it('expires after COMPACT_CACHE_TTL_S', async () => {
    let now = Date.parse('2026-11-30T00:00:00Z')
    const app = await testApp({ ...modelEnv(), COMPACT_CACHE_TTL_S: '60' }, { now: () => now })
    await post(app, 'key-alice-000000000001', history(11))
    now += 59_000
    await post(app, 'key-alice-000000000001', history(11))
    expect(fake.requests).toHaveLength(1)
    now += 2_000
    await post(app, 'key-alice-000000000001', history(11))
    expect(fake.requests).toHaveLength(2)
    await app.close()
  })
})

describe('GET /v1/sessions/{session_id}/compactions', () => {
  it('lists records newest first, which survive a restart of the app', async () => {
    const db = tempDb()
    const before = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_DB: db })
    const ids: string[] = []
    const summaries: { id: string; text: string; sections: unknown }[] = []
    for (let i = 0; i < 3; i++) summaries.push((await post(before, 'key-alice-000000000001', history(i))).json().summary)
    ids.push(...summaries.map((s) => s.id))
    await before.close()

    const after = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_DB: db })
    const res = await after.inject({ url: '/v1/sessions/sess-1/compactions?limit=2', headers: { 'x-api-key': 'key-alice-000000000001' } })
    expect(res.statusCode).toBe(200)
    const page = res.json()
    expect(check('GET', '/v1/sessions/{session_id}/compactions', 200, page)).toEqual([])
    expect(page.compactions.map((r: { id: string }) => r.id)).toEqual([ids[2], ids[1]])
    expect(page.compactions[0]).toMatchObject({ session_id: 'sess-1', key_name: 'alice', mode: 'manual', reason: 'manual', summarizer: { kind: 'extractive' } })
    expect(page.compactions[0].summary.text).toContain('fix bug 2')
    // the record says what the response said, sections included
    expect(page.compactions[0].summary).toEqual({ text: summaries[2]!.text, sections: summaries[2]!.sections })
    const next = (
      await after.inject({ url: `/v1/sessions/sess-1/compactions?limit=2&cursor=${page.next_cursor}`, headers: { 'x-api-key': 'key-alice-000000000001' } })
    ).json()
    expect(next.compactions.map((r: { id: string }) => r.id)).toEqual([ids[0]])
    expect(next.next_cursor).toBeNull()
    await after.close()
  })

  it("answers another key's session exactly like an empty one", async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS })
    await post(app, 'key-alice-000000000001', history())
    const get = (key: string, session: string) => app.inject({ url: `/v1/sessions/${session}/compactions`, headers: { 'x-api-key': key } })
    const notYours = await get('key-bob-000000000000002', 'sess-1')
    const none = await get('key-bob-000000000000002', 'sess-never')
    expect(notYours.statusCode).toBe(none.statusCode)
    expect(notYours.json()).toEqual({ ...none.json(), session_id: 'sess-1' })
    expect(notYours.json().compactions).toEqual([])
    expect((await get('key-alice-000000000001', 'sess-1')).json().compactions).toHaveLength(1)
    expect((await app.inject({ url: '/v1/sessions/sess-1/compactions' })).statusCode).toBe(401)
    await app.close()
  })

  it('400 for a bad limit or cursor, naming it', async () => {
    const app = await testApp()
    expect((await app.inject({ url: '/v1/sessions/s/compactions?limit=0' })).json().error.path).toBe('/limit')
    expect((await app.inject({ url: '/v1/sessions/s/compactions?cursor=nope' })).json().error.path).toBe('/cursor')
    await app.close()
  })
})

describe('a store that fails', () => {
  it('a corrupt database file is a clear start-up error, not a crash loop', async () => {
    const db = tempDb()
    writeFileSync(db, 'not sqlite at all '.repeat(200))
    await expect(testApp({ COMPACT_DB: db })).rejects.toThrow(StoreError)
    const { code, stderr } = await runToExit({ COMPACT_DB: db, PORT: '0' })
    expect(code).toBe(78)
    expect(stderr).toContain(`COMPACT_DB: cannot open the database ${db}: file is not a database`)
  })

  it('a store that turns read-only fails /readyz with 503, and compactions are still answered', async () => {
    // Writes on the connection the test makes read-only (a file's writes run in a thread of their own otherwise).
    const app = await testApp({}, { store: new SqliteStore(tempDb(), { writer: 'inline' }) })
    expect((await app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready', checks: { store: 'ok', keys: 'not wrapped (no COMPACT_MASTER_KEY)' } })
    ;(app.store.inner as SqliteStore).connection.pragma('query_only = 1')
    const ready = await app.inject({ url: '/readyz' })
    expect(ready.statusCode).toBe(503)
    expect(ready.json().checks.store).toMatch(/not writable/)
    expect(check('GET', '/readyz', 503, ready.json())).toEqual([])
    const res = await app.inject({ method: 'POST', url: '/v1/compact', payload: history() })
    expect(res.statusCode).toBe(200)
    expect(res.json().compacted).toBe(true)
    const metrics = (await app.inject({ url: '/metrics' })).body
    expect(metrics).toMatch(/compaction_store_errors_total\{operation="record_write"\} 1/)
    await app.close()
  })

  it('prunes records past COMPACT_RETENTION_DAYS', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z')
    const db = tempDb()
    const app = await testApp({ COMPACT_DB: db, COMPACT_RETENTION_DAYS: '30' })
    await app.inject({ method: 'POST', url: '/v1/compact', payload: history() })
    await app.close()
    // the record was written at the real time; a clock 40 days on prunes it at start
    now = Date.now() + 40 * 86_400_000
    const later = await testApp({ COMPACT_DB: db, COMPACT_RETENTION_DAYS: '30' }, { now: () => now })
    await later.ready() // ready before the prune is done: it is not awaited
    await later.pruned()
    expect((await later.inject({ url: '/v1/sessions/sess-1/compactions' })).json().compactions).toEqual([])
    await later.close()
  })

  it('answers 503 with Retry-After, in the one error shape, when the store cannot be read; the log keeps the reason', async () => {
    const store = new SqliteStore(':memory:')
    const app = await testApp({}, { store })
    store.connection.close()
    for (const [method, url, payload] of [
      ['GET', '/v1/sessions/sess-1/compactions', undefined],
      ['POST', '/v1/sessions/sess-1/recall', { query: 'parser' }],
      ['GET', '/v1/sessions/sess-1/recap', undefined]
    ] as const) {
      const res = await app.inject({ method, url, ...(payload ? { payload } : {}) })
      expect(res.statusCode, url).toBe(503)
      expect(res.headers['retry-after']).toBe('5')
      expect(res.json().error).toEqual({ type: 'api_error', message: expect.stringContaining('cannot be read') })
    }
    await app.close()
  })
})

describe('session ids', () => {
  it('refuses, naming the field, an id records could not keep or a URL give back: ".", "..", a control character; and reads of one are a 400, never a 503', async () => {
    const app = await testApp({})
    const history = [user('a'), assistant('b'), user('c')]
    for (const id of ['.', '..', 'a\u0000b', 'line\nbreak']) {
      const res = await app.inject({ method: 'POST', url: '/v1/compact', payload: { mode: 'manual', session_id: id, messages: history } })
      expect(res.statusCode, JSON.stringify(id)).toBe(400)
      expect(res.json().error.path).toBe('/session_id')
      expect(res.json().error.message).toContain('no control character, and not "." or ".."')
    }
    expect((await app.inject({ url: '/v1/sessions/a%00b/compactions' })).statusCode).toBe(400)
    expect((await app.inject({ method: 'POST', url: '/v1/compact', payload: { mode: 'manual', session_id: 'ok.1', messages: history } })).statusCode).toBe(200)
    expect((await app.inject({ url: '/v1/sessions/ok.1/compactions' })).json().compactions).toHaveLength(1)
    await app.close()
  })
})

describe('GET /v1/sessions', () => {
  it("lists the caller's sessions, newest activity first, in pages; another key's never appear", async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_DB: tempDb() })
    try {
      const alice = 'key-alice-000000000001'
      for (const [key, session] of [
        [alice, 'sess-a'],
        [alice, 'sess-b'],
        ['key-bob-000000000000002', 'sess-bob'],
        [alice, 'sess-a']
      ] as const) {
        expect((await post(app, key, { ...history(), session_id: session })).statusCode).toBe(200)
      }
      const first = await app.inject({ method: 'GET', url: '/v1/sessions?limit=1', headers: { 'x-api-key': alice } })
      expect(first.statusCode).toBe(200)
      const page = first.json()
      expect(check('GET', '/v1/sessions', 200, page)).toEqual([])
      expect(page.sessions).toEqual([
        expect.objectContaining({ session_id: 'sess-a', compactions: 2, raw_history_tokens: expect.any(Number), context_after_compaction: expect.any(Number) })
      ])
      const rest = (await app.inject({ method: 'GET', url: `/v1/sessions?limit=1&cursor=${page.next_cursor}`, headers: { 'x-api-key': alice } })).json()
      expect(rest).toEqual({ sessions: [expect.objectContaining({ session_id: 'sess-b', compactions: 1 })], next_cursor: null })
      const bob = (await app.inject({ method: 'GET', url: '/v1/sessions', headers: { 'x-api-key': 'key-bob-000000000000002' } })).json()
      expect(bob.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(['sess-bob'])
      expect((await app.inject({ method: 'GET', url: '/v1/sessions' })).statusCode).toBe(401)
      const bad = await app.inject({ method: 'GET', url: '/v1/sessions?cursor=nope', headers: { 'x-api-key': alice } })
      expect(bad.statusCode).toBe(400)
    } finally {
      await app.close()
    }
  })
})

describe('GET /v1/sessions/{session_id}/compactions/{compaction_id}', () => {
  it('shows one compaction: its record, the messages it removed and its cold layer; 404 for another key or id', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_DB: tempDb() })
    try {
      const alice = 'key-alice-000000000001'
      const messages = [user('fix the date parser'), assistant('looking at it'), user('it fails on UTC+14'), assistant('found the offset'), user('and now?')]
      const compacted = (await post(app, alice, { messages, mode: 'manual', keep_turns: 1, session_id: 'sess-detail' })).json()
      const id = compacted.summary.id as string
      const res = await app.inject({ method: 'GET', url: `/v1/sessions/sess-detail/compactions/${id}`, headers: { 'x-api-key': alice } })
      expect(res.statusCode).toBe(200)
      const detail = res.json()
      expect(check('GET', '/v1/sessions/{session_id}/compactions/{compaction_id}', 200, detail)).toEqual([])
      expect(detail.compaction.id).toBe(id)
      expect(detail.compaction.summary.text).toBe(compacted.summary.text)
      expect(detail.removed).toEqual({ from: 0, to: compacted.kept_from - 1, messages: compacted.kept_from })
      expect(Object.values(detail.cold_layer as Record<string, number>).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
      for (const [key, url] of [
        ['key-bob-000000000000002', `/v1/sessions/sess-detail/compactions/${id}`],
        [alice, '/v1/sessions/sess-detail/compactions/cmp_none'],
        [alice, `/v1/sessions/other/compactions/${id}`]
      ] as const) {
        const miss = await app.inject({ method: 'GET', url, headers: { 'x-api-key': key } })
        expect(miss.statusCode).toBe(404)
        expect(miss.json().error.type).toBe('not_found_error')
      }
    } finally {
      await app.close()
    }
  })
})

describe('DELETE /v1/sessions/{session_id}', () => {
  it('needs a key, answers in the contract, and is a 503 to retry, never a 500, when the store cannot be written', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS })
    const alice = 'key-alice-000000000001'
    expect((await post(app, alice, history())).statusCode).toBe(200)
    expect((await app.inject({ method: 'DELETE', url: '/v1/sessions/sess-1' })).statusCode).toBe(401)
    const res = await app.inject({ method: 'DELETE', url: '/v1/sessions/sess-1', headers: { 'x-api-key': alice } })
    expect(res.statusCode).toBe(200)
    expect(check('DELETE', '/v1/sessions/{session_id}', 200, res.json())).toEqual([])
    expect(res.json()).toMatchObject({ session_id: 'sess-1', deleted: { compactions: 1 }, space_reclaimed: true })
    await app.close()

    const store = new SqliteStore(':memory:')
    const broken = await testApp({}, { store })
    store.connection.close()
    const failed = await broken.inject({ method: 'DELETE', url: '/v1/sessions/sess-1' })
    expect(failed.statusCode).toBe(503)
    expect(failed.headers['retry-after']).toBe('5')
    expect(failed.json().error).toEqual({ type: 'api_error', message: 'the record store cannot be written right now' })
    await broken.close()
  })
})

describe('GET /v1/sessions/{session_id}/timeline', () => {
  it("gives each compaction's prompt before and after and its budget, oldest first; says when older ones were left out", async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_DB: tempDb() })
    try {
      const alice = 'key-alice-000000000001'
      const made: { id: string; before: number; after: number }[] = []
      for (const budget of [30_000, 'off', 50_000] as const) {
        const res = (await post(app, alice, { ...history(made.length), session_id: 'sess-t', budget_tokens: budget })).json()
        made.push({ id: res.summary.id, before: res.stats.raw_history_tokens, after: res.stats.context_after_compaction })
      }
      const all = await app.inject({ method: 'GET', url: '/v1/sessions/sess-t/timeline', headers: { 'x-api-key': alice } })
      expect(all.statusCode).toBe(200)
      expect(check('GET', '/v1/sessions/{session_id}/timeline', 200, all.json())).toEqual([])
      expect(all.json()).toEqual({
        session_id: 'sess-t',
        complete: true,
        points: made.map((m, i) => ({
          compaction_id: m.id,
          created_at: expect.any(String),
          raw_history_tokens: m.before,
          context_after_compaction: m.after,
          budget_tokens: [30_000, null, 50_000][i]
        }))
      })
      const newest = (await app.inject({ method: 'GET', url: '/v1/sessions/sess-t/timeline?limit=2', headers: { 'x-api-key': alice } })).json()
      expect(newest.points.map((p: { compaction_id: string }) => p.compaction_id)).toEqual([made[1]!.id, made[2]!.id])
      expect(newest.complete).toBe(false)
      expect(
        (await app.inject({ method: 'GET', url: '/v1/sessions/sess-t/timeline', headers: { 'x-api-key': 'key-bob-000000000000002' } })).json().points
      ).toEqual([])
      expect((await app.inject({ method: 'GET', url: '/v1/sessions/sess-t/timeline?limit=0', headers: { 'x-api-key': alice } })).statusCode).toBe(400)
    } finally {
      await app.close()
    }
  })
})
