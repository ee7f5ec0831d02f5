import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { buildApp } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { parsePrometheus, value } from '../helpers/prometheus.js'

const history = { messages: [user('a'), assistant('b'), user('c')], mode: 'manual' }
const KEYS = 'team=key-team-1234567890abcdef'

describe('keys under attack', () => {
  it('counts failed authentications per address: 429 with Retry-After past the limit, even for the right key, and other addresses unaffected', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_AUTH_FAILURES_PER_MIN: '5', COMPACT_TRUST_PROXY: 'true' })
    const from = (ip: string, key: string) =>
      app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': key, 'x-forwarded-for': ip }, payload: history })
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) statuses.push((await from('203.0.113.7', `guess-${i}`)).statusCode)
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429, 429, 429])
    const blocked = await from('203.0.113.7', 'key-team-1234567890abcdef')
    expect(blocked.statusCode).toBe(429)
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0)
    expect(blocked.json().error.type).toBe('rate_limit_error')
    // another client behind the same proxy is its own address
    expect((await from('198.51.100.9', 'key-team-1234567890abcdef')).statusCode).toBe(200)
    await app.close()
  })

  it('counts a wrong key and the connection it comes on too: a client that writes its own X-Forwarded-For, or one key tried from many addresses, is held all the same', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_AUTH_FAILURES_PER_MIN: '2', COMPACT_TRUST_PROXY: 'true' })
    const from = (ip: string, key: string) =>
      app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': key, 'x-forwarded-for': ip }, payload: history })
    // one leaked key tried from addresses of its own: the third try is held, whatever the address
    expect([(await from('10.1.0.1', 'leaked-key-0000001')).statusCode, (await from('10.1.0.2', 'leaked-key-0000001')).statusCode]).toEqual([401, 401])
    const third = await from('10.1.0.3', 'leaked-key-0000001')
    expect(third.statusCode).toBe(429)
    expect(third.json().error.message).toContain('with this key')
    // a guesser that names a new address each time: the connection's own peer has ten times an address's room
    const statuses: number[] = []
    for (let i = 0; i < 24; i++) statuses.push((await from(`10.2.0.${i}`, `guess-${i}-00000000`)).statusCode)
    // (the three tries above came on the same connection's peer)
    expect(statuses.filter((s) => s === 401)).toHaveLength(17)
    expect(statuses.slice(17).every((s) => s === 429)).toBe(true)
    // the right key from that peer waits too; the limits are the minute's
    expect((await from('10.3.0.1', 'key-team-1234567890abcdef')).statusCode).toBe(429)
    await app.close()
  })

  it("counts only wrong keys: keyless requests and probes (a client's HEAD at start) are answered 401 and never lock the address out", async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_AUTH_FAILURES_PER_MIN: '3' })
    for (let i = 0; i < 30; i++) {
      expect((await app.inject({ method: 'HEAD', url: '/v1/doctrine' })).statusCode).toBe(401)
      expect((await app.inject({ method: 'HEAD', url: '/' })).statusCode).toBe(200) // the front door is open
      expect((await app.inject({ method: 'POST', url: '/v1/compact', payload: history })).statusCode).toBe(401)
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
    }
    expect((await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': 'key-team-1234567890abcdef' }, payload: history })).statusCode).toBe(
      200
    )
    for (let i = 0; i < 3; i++)
      expect((await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': `wrong-${i}` }, payload: history })).statusCode).toBe(401)
    expect((await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': 'wrong-3' }, payload: history })).statusCode).toBe(429)
    await app.close()
  })

  it('a 401 carries a Bearer challenge', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS })
    const res = await app.inject({ method: 'POST', url: '/v1/compact', payload: history })
    expect(res.statusCode).toBe(401)
    expect(res.headers['www-authenticate']).toBe('Bearer realm="compaction-gateway"')
    await app.close()
  })

  it('without COMPACT_TRUST_PROXY, X-Forwarded-For is not believed: every guess counts against the socket address', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_AUTH_FAILURES_PER_MIN: '2' })
    for (const ip of ['10.0.0.1', '10.0.0.2']) {
      await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': 'wrong', 'x-forwarded-for': ip }, payload: history })
    }
    const third = await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'x-api-key': 'wrong', 'x-forwarded-for': '10.0.0.3' }, payload: history })
    expect(third.statusCode).toBe(429)
    await app.close()
  })

  it('refuses a key in the query string with a 400 that says to use the header, and logs no query value', async () => {
    const lines: string[] = []
    const stream = new PassThrough()
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)))
    const secret = 'key-team-1234567890abcdef'
    const app = await buildApp({ config: loadConfig({ COMPACT_DB: ':memory:', COMPACT_API_KEYS: KEYS, LOG_LEVEL: 'debug' }), logStream: stream })
    const res = await app.inject({ method: 'POST', url: `/v1/compact?api_key=${secret}`, payload: history })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.message).toContain('send Authorization: Bearer KEY or x-api-key: KEY')
    await app.inject({ method: 'GET', url: `/healthz?note=${secret}` })
    await app.inject({ method: 'GET', url: `/nowhere?x=${secret}` })
    await app.close()
    await new Promise((r) => setImmediate(r))
    expect(lines.join('\n')).not.toContain(secret)
    expect(lines.some((l) => l.includes('/v1/compact?api_key=…'))).toBe(true)
  })
})

describe('what operators see', () => {
  it('every model fault at warn, with its reason and the key name, while compactions are still answered', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { status: 401, errorType: 'authentication_error' }
    const lines: string[] = []
    const stream = new PassThrough()
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)))
    const app = await buildApp({
      config: loadConfig({
        COMPACT_DB: ':memory:',
        COMPACT_API_KEYS: KEYS,
        LOG_LEVEL: 'warn',
        ANTHROPIC_API_KEY: 'sk-ant-test-000000000000',
        ANTHROPIC_BASE_URL: fake.url
      }),
      logStream: stream
    })
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'x-api-key': 'key-team-1234567890abcdef' },
      payload: { ...history, session_id: 's-warn' }
    })
    expect(res.statusCode).toBe(200)
    expect(res.json().summarizer).toMatchObject({ kind: 'extractive', fallback_reason: 'auth_error' })
    await app.close()
    await fake.close()
    await new Promise((r) => setImmediate(r))
    const warns = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === 'summarizer_fault')
    expect(warns).toHaveLength(1)
    expect(warns[0]).toMatchObject({ level: 40, reason: 'auth_error', key_name: 'team', session_id: 's-warn' })
  })

  it('counts deliberate 503s as their own outcome, not as failures', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 400, toolInput: { objective: 'slow' } }
    const app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-test-000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_MAX_SUMMARIES: '1',
      COMPACT_SUMMARY_QUEUE: '0'
    })
    const body = (n: number) => ({ mode: 'manual', messages: [user(`a${n}`), assistant('b'), user('c')] })
    const answers = await Promise.all([0, 1, 2].map((n) => app.inject({ method: 'POST', url: '/v1/compact', payload: body(n) })))
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 503, 503])
    const samples = parsePrometheus((await app.inject({ url: '/metrics' })).body)
    expect(value(samples, 'compaction_requests_total', { mode: 'manual', outcome: 'overloaded' })).toBe(2)
    expect(value(samples, 'compaction_requests_total', { outcome: 'failed' })).toBe(0)
    await app.close()
    await fake.close()
  })
})
