import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { OPENAPI_PATH } from '../helpers/openapi.js'

describe('the front door', () => {
  let app: App
  beforeAll(async () => {
    app = await testApp({ COMPACT_API_KEYS: 'acme=key-site-000000001' })
  })
  afterAll(async () => app.close())

  it('says what the service is at /, with no key, and links its contract, prompt and metrics', async () => {
    const res = await app.inject({ method: 'GET', url: '/' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(res.body).toContain('<title>compaction-gateway</title>')
    for (const href of ['/ui/', '/openapi.yaml', '/v1/doctrine', '/metrics', '/healthz']) expect(res.body).toContain(`href="${href}"`)
  })

  it('serves the committed contract at /openapi.yaml, with no key', async () => {
    const res = await app.inject({ method: 'GET', url: '/openapi.yaml' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/yaml; charset=utf-8')
    expect(res.body).toBe(readFileSync(OPENAPI_PATH, 'utf8'))
  })

  it("serves the sessions page (built by the suite's setup) with no key, loading nothing from elsewhere; /ui is sent to /ui/", async () => {
    const page = await app.inject({ method: 'GET', url: '/ui/' })
    expect(page.statusCode).toBe(200)
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(page.headers['content-security-policy']).toContain("default-src 'none'; script-src 'self'")
    expect(page.headers['referrer-policy']).toBe('no-referrer')
    for (const [file, type] of [
      ['app.js', 'text/javascript; charset=utf-8'],
      ['app.css', 'text/css; charset=utf-8']
    ]) {
      const res = await app.inject({ method: 'GET', url: `/ui/${file}` })
      expect([res.statusCode, res.headers['content-type']]).toEqual([200, type])
      expect(page.body).toContain(`"${file}"`)
    }
    const bare = await app.inject({ method: 'GET', url: '/ui' })
    expect([bare.statusCode, bare.headers.location]).toEqual([301, '/ui/'])
  })

  it('still asks for a key everywhere else', async () => {
    expect((await app.inject({ method: 'GET', url: '/v1/doctrine' })).statusCode).toBe(401)
  })
})
