import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { jsonProblem } from '../compaction/nesting.js'
import { InvalidRequestError } from '../contract/errors.js'
import { type ItemsField, parseJsonBytes } from '../contract/wire.js'
import { bodyParser } from './body.js'
import { DEFAULT_BODY_LIMIT } from '../contract/defaults.js'

/**
 * JSON bodies parsed with plain JSON.parse (a history's messages one by one, see parseJsonBytes), which
 * is what histories of megabytes need, then looked over once (iteratively) for nesting past the limit
 * and for keys that could poison a prototype, escaped forms included. Both are refused with a 400 that
 * points at the place.
 */
export function parseJsonBody(
  body: Uint8Array,
  field: ItemsField = 'messages'
): { value: unknown; error?: undefined } | { value?: undefined; error: InvalidRequestError } {
  let value: unknown
  try {
    value = parseJsonBytes(body, field)
  } catch (err) {
    return { error: new InvalidRequestError(`the body is not valid JSON: ${(err as Error).message}`) }
  }
  const problem = jsonProblem(value)
  return problem ? { error: new InvalidRequestError(problem.message, problem.path) } : { value }
}

function installJsonParser(app: FastifyInstance): void {
  // JSON only: any other content type is a 415 (Fastify would otherwise read text/plain as a string).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    'application/json',
    bodyParser(app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT, (bytes) => parseJsonBody(bytes))
  )
}

/** JSON bodies only, read as parseJsonBody reads them (routes that keep bytes install their own parser). */
export const jsonParserPlugin = fp(async (app) => installJsonParser(app), { name: 'json-parser' })
