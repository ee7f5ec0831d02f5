import { readFileSync } from 'node:fs'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { parse } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { assistant, call, user } from '../helpers/history.js'
import { OPENAPI_PATH, openapiYaml, responseValidator } from '../helpers/openapi.js'

const committed = readFileSync(OPENAPI_PATH, 'utf8')

describe('openapi.yaml', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(parse(committed) as Parameters<Validator['validate']>[0])
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
  })

  it('has not drifted from the route schemas (npm run openapi rewrites it)', async () => {
    expect(committed).toBe(await openapiYaml())
  })

  it('describes every route the app serves', async () => {
    const doc = parse(committed) as { paths: Record<string, Record<string, unknown>> }
    const app = await testApp()
    // The tree nests a route under its prefix (/v1/messages, then /count_tokens four columns further in).
    const prefixes: string[] = []
    const routes: [string, string][] = []
    for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
      const m = /^([└├│─ ]*)([/\w{}:.-]+) \(([A-Z, ]+)\)/.exec(line)
      if (!m) continue
      const depth = m[1]!.length / 4 - 1
      prefixes[depth] = m[2]!
      routes.push([prefixes.slice(0, depth + 1).join(''), m[3]!])
    }
    await app.close()
    const served = new Set(
      routes.flatMap(([path, methods]) =>
        methods
          .split(', ')
          .filter((v) => v !== 'HEAD')
          .map((v) => `${v.toLowerCase()} ${path.replace(/:(\w+)/g, '{$1}')}`)
      )
    )
    const documented = new Set(Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((v) => `${v} ${p}`)))
    expect(served.size).toBeGreaterThanOrEqual(4)
    // a web page's folder (its links are relative to it) is documented by its address without the slash, which sends a browser on to it
    const folders = [...served].filter((r) => r.endsWith('/') && r !== 'get /')
    expect(folders).toEqual(['get /ui/'])
    for (const f of folders) expect(documented).toContain(f.slice(0, -1))
    expect([...served].filter((r) => !folders.includes(r)).sort()).toEqual([...documented].sort())
  })

  it('holds examples that validate against their own schemas', () => {
    const doc = parse(committed) as Record<string, unknown>
    const ajv = new Ajv2020({ strict: false, validateFormats: false })
    ajv.addSchema(doc, 'openapi.json')
    const checks: [string, unknown][] = []
    const walk = (node: unknown, pointer: string): void => {
      if (typeof node !== 'object' || node === null) return
      const obj = node as Record<string, unknown>
      if ('schema' in obj && 'example' in obj) checks.push([`${pointer}/schema`, obj.example])
      if (Array.isArray(obj.examples) && pointer.includes('/schemas/')) for (const e of obj.examples) checks.push([pointer, e])
      for (const [k, v] of Object.entries(obj)) walk(v, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`)
    }
    walk(doc, '#')
    expect(checks.length).toBeGreaterThanOrEqual(3)
    for (const [pointer, example] of checks) {
      const validate = ajv.getSchema(`openapi.json${pointer}`)!
      expect(validate(example), `${pointer}: ${JSON.stringify(validate.errors)}`).toBe(true)
    }
  })
})

describe('real responses validate against openapi.yaml', () => {
  let app: App
  const check = responseValidator()
  beforeAll(async () => {
    app = await testApp({ COMPACT_BODY_LIMIT_MB: '0.5' })
  })
  afterAll(async () => {
    await app.close()
  })

  const cases: [string, string, string, unknown, number][] = [
    ['compacted', 'POST', '/v1/compact', { messages: loadTranscripts(FIXTURE_DIR)[0]!.messages, mode: 'manual' }, 200],
    ['under budget', 'POST', '/v1/compact', { messages: [user('a')] }, 200],
    ['dry run', 'POST', '/v1/compact', { messages: [user('a'), assistant('b'), user('c')], mode: 'manual', dry_run: true }, 200],
    ['schema error', 'POST', '/v1/compact', { messages: [], extra: 1 }, 400],
    ['history error', 'POST', '/v1/compact', { messages: [user('a'), assistant(call('x', 'bash', {})), user('b')] }, 422],
    ['too large', 'POST', '/v1/compact', { messages: [user('x'.repeat(600_000))] }, 413],
    ['liveness', 'GET', '/healthz', undefined, 200],
    ['readiness', 'GET', '/readyz', undefined, 200],
    ['doctrine', 'GET', '/v1/doctrine', undefined, 200]
  ]
  it('the validator rejects what the contract does not allow', () => {
    expect(check('POST', '/v1/compact', 200, { compacted: 'yes', reason: 'because' }).length).toBeGreaterThan(0)
    expect(check('POST', '/v1/compact', 422, { type: 'error', error: { type: 'x' } }).length).toBeGreaterThan(0)
  })

  it.each(cases)('%s', async (_name, method, url, payload, status) => {
    const res = await app.inject({ method: method as 'GET' | 'POST', url, ...(payload === undefined ? {} : { payload: payload as object }) })
    expect(res.statusCode).toBe(status)
    expect(check(method, url, status, res.json())).toEqual([])
  })
})
