import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { InvalidRequestError } from '../contract/errors.js'
import type { ItemsField } from '../contract/wire.js'
import { readJson } from '../contract/validation.js'
import { bodyParser } from './body.js'
import { DEFAULT_BODY_LIMIT } from '../contract/defaults.js'

/** A JSON body read as every body is (readJson), or the 400 that says why it cannot be. */
export function parseJsonBody(
  body: Uint8Array,
  field: ItemsField = 'messages'
): { value: unknown; error?: undefined } | { value?: undefined; error: InvalidRequestError } {
  const read = readJson(body, field)
  return read.ok ? { value: read.value } : { error: new InvalidRequestError(read.message, read.path) }
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

/**
 * The validator of a route whose body stays bytes until it is read (the compact route's large bodies, read in
 * a worker; the proxies', forwarded unread under their budget): Fastify's validation never sees a parsed
 * body there, so the route's schema is checked where the body is read (contract/validation.ts's `bodyReader`,
 * compiled once from the same schema), and this one passes what Fastify hands it.
 */
export const checkedWhenRead = (): (() => true) => () => true
