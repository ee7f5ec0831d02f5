import type { FastifyInstance } from 'fastify'
import { jsonProblem } from '../compaction/nesting.js'
import { ApiError } from './errors.js'

/**
 * JSON bodies parsed with plain JSON.parse, which is what histories of megabytes need, then looked over
 * once (iteratively) for nesting past the limit and for keys that could poison a prototype, escaped
 * forms included. Both are refused with a 400 that points at the place.
 */
export function parseJsonBody(text: string): { value: unknown; error?: undefined } | { value?: undefined; error: ApiError } {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    return { error: new ApiError(400, 'invalid_request_error', `the body is not valid JSON: ${(err as Error).message}`) }
  }
  const problem = jsonProblem(value)
  return problem ? { error: new ApiError(400, 'invalid_request_error', problem.message, problem.path) } : { value }
}

export function installJsonParser(app: FastifyInstance): void {
  // JSON only: any other content type is a 415 (Fastify would otherwise read text/plain as a string).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const parsed = parseJsonBody(body as string)
    if (parsed.error) done(parsed.error, undefined)
    else done(null, parsed.value)
  })
}
