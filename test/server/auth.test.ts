import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { createHash } from 'node:crypto'
import { capturedLog, testApp } from '../helpers/app.js'
import { tempDb } from '../helpers/process.js'
import { earlierName } from '../../src/service/tenants.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'

const history = { messages: [user('a'), assistant('b'), user('c')], mode: 'manual' }

describe('API keys', () => {
  let app: App
  beforeAll(async () => {
    app = await testApp({ COMPACT_API_KEYS: 'alpha=key-alpha-1234567890, key-unnamed-0987654321' })
  })
  afterAll(async () => {
    await app.close()
  })
  const post = (headers: Record<string, string>) => app.inject({ method: 'POST', url: '/v1/compact', headers, payload: history })

  it('401 without a key, in the one error shape', async () => {
    const res = await post({})
    expect(res.statusCode).toBe(401)
    expect(res.json()).toEqual({ type: 'error', error: { type: 'authentication_error', message: expect.stringContaining('API key is required') } })
  })

  it('401 with a wrong key, in either header', async () => {
    expect((await post({ authorization: 'Bearer key-alpha-123456789X' })).statusCode).toBe(401)
    expect((await post({ 'x-api-key': 'nope' })).statusCode).toBe(401)
    expect((await post({ authorization: 'Basic a2V5LWFscGhh' })).statusCode).toBe(401)
  })

  it('accepts a right key in both header forms, named or not', async () => {
    expect((await post({ authorization: 'Bearer key-alpha-1234567890' })).statusCode).toBe(200)
    expect((await post({ 'x-api-key': 'key-alpha-1234567890' })).statusCode).toBe(200)
    expect((await post({ authorization: 'bearer key-unnamed-0987654321' })).statusCode).toBe(200)
  })

  it('keeps the probes and the scrape open', async () => {
    for (const url of ['/healthz', '/readyz', '/metrics']) expect((await app.inject({ url })).statusCode).toBe(200)
    expect((await app.inject({ url: '/v1/doctrine' })).statusCode).toBe(401)
  })
})

describe('the tenant of a key given without a name', () => {
  const KEY = 'key-unnamed-0987654321'
  const earlier = earlierName(createHash('sha256').update(KEY).digest())
  const run = async (db: string, keys: string, sessions: string[]) => {
    const log = capturedLog()
    const app = await testApp({ COMPACT_DB: db, COMPACT_API_KEYS: keys }, { logger: { level: 'info' }, logStream: log.stream })
    for (const session of sessions) {
      const res = await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': KEY }, payload: { ...history, session_id: session } })
      expect(res.statusCode).toBe(200)
    }
    const listed = (await app.inject({ url: '/v1/sessions', headers: { 'x-api-key': KEY } })).json<{ sessions: { session_id: string }[] }>()
    await app.close()
    const names = new Set(log.lines.map((l) => l.key_name).filter((n) => n !== undefined))
    return {
      names: [...names],
      listed: listed.sessions.map((x) => x.session_id).sort(),
      warned: log.lines.filter((l) => l.event === 'tenant_named_by_key_hash')
    }
  }

  it("is named by a keyed hash under the store's salt, never by the key's hash alone: the same after a restart, another in another store", async () => {
    const db = tempDb()
    const first = await run(db, KEY, ['sess-a'])
    expect(first.names).toHaveLength(1)
    expect(first.names[0]).toMatch(/^key-[0-9a-f]{16}$/)
    expect(first.names[0]).not.toBe(earlier)
    // restarted on the same store: the same tenant, its sessions its own
    const again = await run(db, KEY, ['sess-b'])
    expect(again.names).toEqual(first.names)
    expect(again.listed).toEqual(['sess-a', 'sess-b'])
    expect(again.warned).toEqual([])
    // another store, another salt: the name says nothing of the key
    expect((await run(tempDb(), KEY, [])).names).not.toEqual(first.names)
  })

  it('keeps the name earlier builds gave it where the store holds its sessions under that name, said once at warn', async () => {
    const db = tempDb()
    // written under the earlier name (as an earlier build named the key)
    await run(db, `${earlier}=${KEY}`, ['sess-old'])
    const now = await run(db, KEY, ['sess-new', 'sess-newer'])
    expect(now.names).toEqual([earlier])
    expect(now.listed).toEqual(['sess-new', 'sess-newer', 'sess-old'])
    expect(now.warned).toHaveLength(1)
    expect(now.warned[0]).toMatchObject({ level: 40, key_name: earlier })
  })
})

describe('limits', () => {
  it('429 with Retry-After past the per-key rate, each key counted on its own', async () => {
    const app = await testApp({ COMPACT_API_KEYS: 'a=key-a-0000000000,b=key-b-0000000000', COMPACT_RATE_LIMIT_PER_MIN: '2' })
    const post = (key: string) => app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': key }, payload: history })
    expect((await post('key-a-0000000000')).statusCode).toBe(200)
    expect((await post('key-a-0000000000')).statusCode).toBe(200)
    const limited = await post('key-a-0000000000')
    expect(limited.statusCode).toBe(429)
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0)
    expect(limited.json().error.type).toBe('rate_limit_error')
    expect((await post('key-b-0000000000')).statusCode).toBe(200)
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200)
    await app.close()
  })

  it('503 with Retry-After when summaries in flight and the queue are full', async () => {
    const fake = await new FakeAnthropic().start()
    // the model answers once the third request has been turned away: one summary in flight, one queued
    let release = (): void => undefined
    const held = new Promise<void>((resolve) => (release = resolve))
    fake.fallback = { after: held, toolInput: {} }
    const app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-test-limits-00000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_MAX_SUMMARIES: '1',
      COMPACT_SUMMARY_QUEUE: '1'
    })
    // three different histories: identical ones would share one model call
    const send = (n: number) =>
      app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: [user(`a${n}`), assistant('b'), user('c')], mode: 'manual' } })
    const sent = [send(1), send(2), send(3)]
    // the one answered while the model holds its answer is the one turned away
    const turnedAway = await Promise.race(sent)
    expect(turnedAway.statusCode).toBe(503)
    expect(Number(turnedAway.headers['retry-after'])).toBeGreaterThan(0)
    expect(turnedAway.json().error.type).toBe('overloaded_error')
    release()
    const codes = (await Promise.all(sent)).map((r) => r.statusCode).sort()
    expect(codes).toEqual([200, 200, 503])
    // the queued one ran after the first: never two calls at once
    expect(fake.requests).toHaveLength(2)
    await app.close()
    await fake.close()
  })

  it('413 over the body limit comes before auth is of any use', async () => {
    const app = await testApp({ COMPACT_BODY_LIMIT_MB: '0.01', COMPACT_API_KEYS: 'k=key-k-000000000000' })
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'x-api-key': 'key-k-000000000000' },
      payload: { messages: [user('x'.repeat(20_000))] }
    })
    expect(res.statusCode).toBe(413)
    await app.close()
  })
})
