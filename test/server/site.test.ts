import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { OPENAPI_PATH } from '../helpers/openapi.js'

describe('the front door', () => {
  let app: App
  beforeAll(async () => {
    app = await testApp({ COMPACT_API_KEYS: 'acme=key-site-1' })
  })
  afterAll(async () => app.close())

  it('says what the service is at /, with no key, and links its contract, prompt and metrics', async () => {
    const res = await app.inject({ method: 'GET', url: '/' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(res.body).toContain('<title>compaction-gateway</title>')
    for (const href of ['/openapi.yaml', '/v1/doctrine', '/metrics', '/healthz']) expect(res.body).toContain(`href="${href}"`)
  })

  it('serves the committed contract at /openapi.yaml, with no key', async () => {
    const res = await app.inject({ method: 'GET', url: '/openapi.yaml' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/yaml; charset=utf-8')
    expect(res.body).toBe(readFileSync(OPENAPI_PATH, 'utf8'))
  })

  it('still asks for a key everywhere else', async () => {
    expect((await app.inject({ method: 'GET', url: '/v1/doctrine' })).statusCode).toBe(401)
  })
})
