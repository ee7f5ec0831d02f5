import { describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { assistant, user } from '../helpers/history.js'
import { responseValidator } from '../helpers/openapi.js'

const KEYS = 'alice=key-alice-000000000001,bob=key-bob-000000000000002'
const ALICE = { 'x-api-key': 'key-alice-000000000001' }
const BOB = { 'x-api-key': 'key-bob-000000000000002' }
const check = responseValidator()
const NOW = Date.UTC(2026, 11, 3, 12, 30, 0)

const history = (session: string | undefined) => ({
  messages: [user('fix the parser'), assistant('looking at src/parser.ts'), user('and the tests?')],
  mode: 'manual',
  ...(session ? { session_id: session } : {})
})
const overview = async (app: App, query = '', headers: Record<string, string> = ALICE) => app.inject({ method: 'GET', url: `/v1/overview${query}`, headers })

describe('GET /v1/overview', () => {
  it("tells a key's compactions over the range asked for, by who wrote their summaries, its own and no other key's", async () => {
    let now = NOW
    const app = await testApp({ COMPACT_API_KEYS: KEYS }, { now: () => now })
    for (const session of ['s-1', 's-1', 's-2', undefined]) {
      const res = await app.inject({ method: 'POST', url: '/v1/compact', headers: ALICE, payload: history(session) })
      expect(res.json().compacted).toBe(true)
    }
    now = NOW + 3 * 3_600_000
    await app.inject({ method: 'POST', url: '/v1/compact', headers: ALICE, payload: history('s-1') })

    const all = await overview(app)
    expect(all.statusCode).toBe(200)
    expect(check('GET', '/v1/overview', 200, all.json())).toEqual([])
    const o = all.json()
    // a week up to now, by the day; every compaction through the compact route, written by the extractive summarizer (no model key)
    expect(o).toMatchObject({ session_id: null, bucket: 'day', to: new Date(now).toISOString() })
    expect(o.compactions).toMatchObject({ total: 5, via_proxy: 0, via_compact_route: 5 })
    expect(o.summaries).toMatchObject({ model: 0, extractive_chosen: 5, fallback: 0, cache: 0 })
    expect(o.crossings).toMatchObject({ count: 0, mean_wait_ms: null, max_wait_ms: null })
    // seven days and the half hour the range's start is brought back to (the start of its hour): eight steps of a day
    expect(o.from).toBe(new Date(now - 7 * 86_400_000 - 30 * 60_000).toISOString())
    expect(o.series).toHaveLength(8)
    expect(o.series.reduce((n: number, p: { compactions: number }) => n + p.compactions, 0)).toBe(5)

    // the first hours alone, by the hour: the later compaction is outside it
    const early = (await overview(app, `?from=${new Date(NOW - 3_600_000).toISOString()}&to=${new Date(NOW + 3_600_000).toISOString()}`)).json()
    expect(early.bucket).toBe('hour')
    expect(early.series.map((p: { compactions: number }) => p.compactions)).toEqual([0, 4, 0]) // 11:00, 12:00, 13:00
    expect(early.compactions.total).toBe(4)
    // one session's
    expect((await overview(app, '?session_id=s-1')).json().compactions.total).toBe(3)
    expect((await overview(app, '?session_id=s-2')).json().compactions.total).toBe(1)
    // another key's: none of these
    expect((await overview(app, '', BOB)).json().compactions.total).toBe(0)
    expect((await overview(app, '?session_id=s-1', BOB)).json().compactions.total).toBe(0)
    // deleting a session takes its own figures; the key's total keeps its numbers (they name no session)
    expect((await app.inject({ method: 'DELETE', url: '/v1/sessions/s-2', headers: ALICE })).statusCode).toBe(200)
    expect((await overview(app, '?session_id=s-2')).json().compactions.total).toBe(0)
    expect((await overview(app)).json().compactions.total).toBe(5)
    await app.close()
  })

  it('refuses a range it cannot read with a 400 naming the parameter and what to send', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS })
    const cases: [string, RegExp][] = [
      ['?from=yesterday', /querystring\/from|querystring\.from/],
      ['?from=2026-13-01T00:00:00Z', /querystring\.from is not a time: "2026-13-01T00:00:00Z" \(send an RFC 3339 time/],
      ['?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z', /querystring\.from must be before to \(2026-12-01T00:00:00.000Z\)/],
      ['?from=2024-01-01T00:00:00Z&to=2026-12-01T00:00:00Z', /querystring\.from must be at most 366 days before to/],
      ['?session_id=', /session_id/],
      ['?bucket=week', /bucket/]
    ]
    for (const [query, message] of cases) {
      const res = await overview(app, query)
      expect(res.statusCode, query).toBe(400)
      expect(res.json().error.message, query).toMatch(message)
      expect(check('GET', '/v1/overview', 400, res.json())).toEqual([])
    }
    expect((await app.inject({ method: 'GET', url: '/v1/overview' })).statusCode).toBe(401)
    await app.close()
  })
})
