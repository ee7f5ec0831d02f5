import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { REDIS_URL, dropSchemas, freshPgUrl, freshRedisPrefix, pgBehindRelay, pgMissing, redisMissing } from '../helpers/services.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

const missing = pgMissing ?? redisMissing
const KEY = 'gw-replica-key-1'
const headers = { authorization: `Bearer ${KEY}` }
/** Other tenants, whose requests leave alice's rate budget as the budget test counts it. */
const BOB_KEY = 'gw-replica-key-bob-2'
const CAROL_KEY = 'gw-replica-key-carol-3'

function history(tag: string) {
  return [
    user(`Fix the flaky upload test in tests/test_upload_${tag}.py`),
    ...shellStep(`toolu_${tag}_1`, 'pytest tests/test_upload.py -x', 'FAILED tests/test_upload.py::test_resume - ConnectionResetError: peer reset', true),
    assistant('The retry loop does not reset the offset; fixing upload/retry.py.'),
    user('Good, go on'),
    ...shellStep(`toolu_${tag}_2`, "sed -i 's/offset = 0/offset = sent/' upload/retry.py && pytest -x", '12 passed'),
    assistant('All 12 tests pass.'),
    user('Thanks. Now look at the download side')
  ]
}

const compact = (app: App, tag: string, session: string, auth: Record<string, string> = headers) =>
  app.inject({ method: 'POST', url: '/v1/compact', headers: auth, payload: { mode: 'manual', session_id: session, messages: history(tag) } })

describe.skipIf(missing !== undefined)(`two replicas on one PostgreSQL and Redis${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let fake: FakeAnthropic
  let a: App
  let b: App
  const summaryCalls = () => fake.requests.length

  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 400, toolInput: { objective: 'Fix the flaky upload test' } }
    const env = {
      COMPACT_DB: freshPgUrl(),
      COMPACT_REDIS_URL: `${REDIS_URL}?prefix=${freshRedisPrefix()}`,
      ANTHROPIC_API_KEY: 'sk-ant-replica-test-000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `alice=${KEY},bob=${BOB_KEY},carol=${CAROL_KEY}`,
      COMPACT_RATE_LIMIT_PER_MIN: '8'
    }
    a = await testApp(env)
    b = await testApp(env)
    await Promise.all([a.ready(), b.ready()])
  })
  afterAll(async () => {
    await a?.close()
    await b?.close()
    await fake?.close()
    await dropSchemas()
  })

  it("answers a retry on B from A's summary, with no model call, and lists A's records on B", async () => {
    const first = await compact(a, 'retry', 'sess-retry')
    expect(first.statusCode).toBe(200)
    expect(first.json().summarizer.kind).toBe('anthropic')
    const calls = summaryCalls()
    const retry = await compact(b, 'retry', 'sess-retry')
    expect(retry.json().summarizer.kind).toBe('cache')
    expect(summaryCalls()).toBe(calls)
    const listed = await b.inject({ url: '/v1/sessions/sess-retry/compactions', headers })
    expect(listed.json().compactions.map((c: { id: string }) => c.id)).toContain(first.json().summary.id)
    // The cold layer A kept is searched on B (full-text search in PostgreSQL).
    const found = await b.inject({ method: 'POST', url: '/v1/sessions/sess-retry/recall', headers, payload: { query: 'ConnectionResetError upload' } })
    expect(found.statusCode).toBe(200)
    expect(found.json().results.length).toBeGreaterThan(0)
    expect(JSON.stringify(found.json().results)).toContain('ConnectionResetError')
  })

  it('makes one model call for identical requests racing on A and B', async () => {
    const before = summaryCalls()
    const [ra, rb] = await Promise.all([compact(a, 'race', 'sess-race'), compact(b, 'race', 'sess-race')])
    expect([ra.statusCode, rb.statusCode]).toEqual([200, 200])
    expect(summaryCalls() - before).toBe(1)
    expect([ra.json().summarizer.kind, rb.json().summarizer.kind].sort()).toEqual(['anthropic', 'cache'])
  })

  it("reads on B a compaction block A sealed (the store's one secret), and refuses it for another tenant", async () => {
    const bob = { authorization: `Bearer ${BOB_KEY}`, 'anthropic-beta': 'compact-2026-09-04' }
    const onDemand = await a.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: bob,
      payload: { model: 'claude-any', max_tokens: 64, messages: history('sealed'), compaction: { type: 'summarize' } }
    })
    expect(onDemand.statusCode).toBe(200)
    const block = (onDemand.json() as { content: { type: string; encrypted_content: string }[] }).content[0]
    expect(block?.encrypted_content).toMatch(/^cgw2\./)
    const next = { model: 'claude-any', max_tokens: 64, messages: [{ role: 'assistant', content: [block] }, user('And the download side?')] }
    const before = fake.requests.length
    const read = await b.inject({ method: 'POST', url: '/v1/messages', headers: bob, payload: next })
    expect(read.statusCode).toBe(200)
    const forwarded = fake.requests.slice(before).at(-1)
    expect(JSON.stringify(forwarded?.body.messages)).toContain('Fix the flaky upload test')
    const other = await b.inject({ method: 'POST', url: '/v1/messages', headers: { authorization: `Bearer ${CAROL_KEY}` }, payload: next })
    expect(other.statusCode).toBe(400)
    expect(other.json().error.message).toMatch(/messages\.0\.content\.0\.(encrypted_content|signature): not a compaction block this gateway sealed/)
  })

  it('keeps one rate budget across both', async () => {
    // Six requests above (compactions, a listing and a search) were counted this minute: 2 of the 8 are left.
    const statuses: number[] = []
    for (const app of [a, b, a, b]) statuses.push((await app.inject({ url: '/v1/doctrine', headers })).statusCode)
    expect(statuses).toEqual([200, 200, 429, 429])
  })
})

/** Log lines an app wrote, parsed. */
function logSink(): { stream: Writable; events: () => string[] } {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean))
      done()
    }
  })
  return { stream, events: () => lines.map((l) => (JSON.parse(l) as { event?: string }).event ?? '') }
}

describe.skipIf(missing !== undefined)(`when PostgreSQL or Redis goes away${missing ? ` (skipped: ${missing})` : ''}`, () => {
  afterAll(async () => dropSchemas())

  it('PostgreSQL down: /readyz 503, compactions still answered (the record lost and counted), and back when it returns', async () => {
    const { url, relay: proxy } = await pgBehindRelay()
    const app = await testApp({ COMPACT_DB: url })
    try {
      expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200)
      await proxy.down()
      expect((await app.inject({ url: '/readyz' })).statusCode).toBe(503)
      const res = await compact(app, 'down', 'sess-down', {})
      expect(res.statusCode).toBe(200)
      expect(res.json().compacted).toBe(true)
      const metrics = (await app.inject({ url: '/metrics' })).body
      expect(metrics).toMatch(/compaction_store_errors_total\{operation="record_write"\} [1-9]/)
      await proxy.up()
      let ready = 503
      for (let i = 0; i < 50 && ready !== 200; i++) {
        ready = (await app.inject({ url: '/readyz' })).statusCode
        if (ready !== 200) await new Promise((r) => setTimeout(r, 100))
      }
      expect(ready).toBe(200)
      const again = await compact(app, 'up', 'sess-up', {})
      const listed = await app.inject({ url: '/v1/sessions/sess-up/compactions' })
      expect(listed.json().compactions.map((c: { id: string }) => c.id)).toEqual([again.json().summary.id])
    } finally {
      await app.close()
      await proxy.down().catch(() => undefined)
    }
  })

  it('Redis down: limits and summaries fall back to the replica, said once in the log, and shared again when it returns', async () => {
    const target = new URL(REDIS_URL)
    const proxy = await new TcpProxy(target.hostname, Number(target.port || 6379)).up()
    const logs = logSink()
    const app = await testApp(
      { COMPACT_REDIS_URL: `redis://127.0.0.1:${proxy.port}?prefix=${freshRedisPrefix()}`, COMPACT_RATE_LIMIT_PER_MIN: '1000' },
      { logger: { level: 'info' }, logStream: logs.stream }
    )
    try {
      await app.ready()
      await proxy.down()
      for (let i = 0; i < 5; i++) expect((await app.inject({ url: '/v1/doctrine' })).statusCode).toBe(200)
      expect((await compact(app, 'redis-down', 's', {})).statusCode).toBe(200)
      for (let i = 0; i < 100 && !logs.events().includes('redis_down'); i++) await new Promise((r) => setTimeout(r, 50))
      // more requests while it is down: said once, not once a request
      for (let i = 0; i < 5; i++) expect((await app.inject({ url: '/v1/doctrine' })).statusCode).toBe(200)
      expect((await compact(app, 'redis-down', 's2', {})).statusCode).toBe(200)
      await proxy.up()
      for (let i = 0; i < 100 && !logs.events().includes('redis_up'); i++) await new Promise((r) => setTimeout(r, 50))
      expect(logs.events().filter((e) => e === 'redis_down')).toHaveLength(1)
      expect(logs.events()).toContain('redis_up')
      expect((await app.inject({ url: '/v1/doctrine' })).statusCode).toBe(200)
    } finally {
      await app.close()
      await proxy.down().catch(() => undefined)
    }
  })
})
