import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { parse, stringify } from 'yaml'
import { buildApp } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'
import { ROOT } from './process.js'

export const OPENAPI_PATH = resolve(ROOT, 'openapi.yaml')

/** The OpenAPI document as the routes describe it today, in YAML. */
export async function openapiYaml(): Promise<string> {
  const app = await buildApp({ config: loadConfig({}), logger: false, openapi: true })
  await app.ready()
  const doc = app.swagger()
  await app.close()
  // YAML 1.1 quoting, so that readers of either YAML version see "off" as a string, not false.
  return stringify(doc, { schema: 'yaml-1.1', lineWidth: 100 })
}

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>> }

/** Validates response bodies against the committed openapi.yaml. */
export function responseValidator(): (method: string, path: string, status: number, body: unknown) => string[] {
  const doc = parse(readFileSync(OPENAPI_PATH, 'utf8')) as Doc
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
  ajv.addSchema(doc as object, 'openapi.json')
  return (method, path, status, body) => {
    const op = doc.paths[path]?.[method.toLowerCase()]
    if (!op) return [`no ${method} ${path} in openapi.yaml`]
    if (!op.responses[String(status)]?.content?.['application/json']) return [`no ${status} response for ${method} ${path} in openapi.yaml`]
    const pointer = `#/paths/${path.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${status}/content/application~1json/schema`
    const validate = ajv.getSchema(`openapi.json${pointer}`)
    if (!validate) return [`cannot compile ${pointer}`]
    return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''}`)
  }
}
