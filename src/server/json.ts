import type { FastifyInstance } from 'fastify'
import sjson from 'secure-json-parse'

/**
 * JSON bodies parsed with plain JSON.parse, which is what histories of megabytes need; only a body that
 * could carry prototype poisoning (a `__proto__` key, or `constructor` with `prototype`) goes through
 * the scanning parser, and is refused as Fastify refuses it by default.
 */
export function installJsonParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string
    try {
      const suspicious = text.includes('"__proto__"') || (text.includes('"constructor"') && text.includes('"prototype"'))
      done(null, suspicious ? sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }) : JSON.parse(text))
    } catch (err) {
      const error = err as Error & { statusCode?: number }
      error.statusCode = 400
      error.message = `the body is not valid JSON: ${error.message}`
      done(error, undefined)
    }
  })
}
