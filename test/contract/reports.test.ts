import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Overview, SessionCost } from '../../src/contract/reports.js'
import { bodyReader } from '../../src/contract/validation.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'

/** The reports' answers as the contract (and the page, which reads their types from it) says them. */
const overview = bodyReader<Overview>(Overview, 'overview')
const cost = bodyReader<SessionCost>(SessionCost, 'cost')

describe("the reports' contract", () => {
  let app: App
  beforeAll(async () => {
    app = await testApp({ COMPACT_API_KEYS: 'acme=ck-reports-test-key-0001' })
  })
  afterAll(async () => {
    await app.close()
  })

  it('holds what the routes answer, once a compaction has been made', async () => {
    const headers = { 'x-api-key': 'ck-reports-test-key-0001' }
    const messages = [
      { role: 'user', content: 'Fix the parser' },
      { role: 'assistant', content: 'Done.' },
      { role: 'user', content: 'Now the docs' }
    ]
    const made = await app.inject({ method: 'POST', url: '/v1/compact', headers, payload: { mode: 'manual', session_id: 'r-1', messages } })
    expect(made.statusCode).toBe(200)
    const answered = await app.inject({ method: 'GET', url: '/v1/overview', headers })
    expect(answered.statusCode).toBe(200)
    expect(overview(answered.json())).toMatchObject({ ok: true, value: { compactions: { total: 1, via_compact_route: 1 } } })
    const spent = await app.inject({ method: 'GET', url: '/v1/sessions/r-1/cost', headers })
    expect(spent.statusCode).toBe(200)
    expect(cost(spent.json())).toMatchObject({ ok: true, value: { session_id: 'r-1' } })
  })

  it('names a field it does not hold: the service cannot add one the page would never be told of', async () => {
    const spent = await app.inject({ method: 'GET', url: '/v1/sessions/r-2/cost', headers: { 'x-api-key': 'ck-reports-test-key-0001' } })
    expect(cost({ ...spent.json<SessionCost>(), per_model: {} })).toEqual({
      ok: false,
      kind: 'invalid_request',
      message: 'cost.per_model is not a known field',
      path: '/per_model'
    })
  })
})
