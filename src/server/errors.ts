import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { loggableUrl } from '../telemetry/logger.js'
import { ERROR_KINDS, type ErrorKind, type ErrorType, GatewayError, StoreUnavailableError, errorTypeOf } from '../contract/errors.js'
import { StoreError } from '../storage/store.js'
import { SummarizerFailedError } from '../summarizer/errors.js'
import type { ErrorResponseBody } from '../contract/schemas.js'
import { type AjvIssue, describeValidation } from '../contract/validation.js'
import fp from 'fastify-plugin'

export function errorBody(type: ErrorType, message: string, path?: string): ErrorResponseBody {
  return { type: 'error', error: path === undefined ? { type, message } : { type, message, path } }
}

/** An answer of one of the table's kinds (ERROR_KINDS gives its status and type), in the one error shape. */
function answer(reply: FastifyReply, kind: ErrorKind, message: string, path?: string): void {
  const { status, type } = ERROR_KINDS[kind]
  void reply.code(status).send(errorBody(type, message, path))
}

/** A URL Fastify could not route (a bad percent-escape, a parameter over the length limit), in the one error shape. */
export function badUrl(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') answer(reply, 'uri_too_long', 'a part of the URL is too long')
  else answer(reply, 'invalid_request', 'the URL is not valid: a percent-escape does not decode')
}

/**
 * Errors on the socket before there is a request (a malformed request line, headers too large, both
 * Content-Length and Transfer-Encoding, a body that did not arrive in time), answered in the one error
 * shape, and the connection closed.
 */
export function answerClientError(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [kind, message]: [ErrorKind, string] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['request_timeout', 'the request did not arrive in time (COMPACT_BODY_TIMEOUT_MS)']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? ['headers_too_large', 'the request headers are too large']
        : ['invalid_request', `the request is not valid HTTP (${err.code ?? 'parse error'})`]
  const { status, type } = ERROR_KINDS[kind]
  const body = JSON.stringify(errorBody(type, message))
  this.log.debug({ err, status }, 'client error on the socket')
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
    )
  }
  socket.destroy()
}

function installErrorHandling(app: FastifyInstance): void {
  // Route templates by method, so that a known path asked with another method is a 405 naming the allowed ones.
  const routes: { pattern: RegExp; method: string }[] = []
  app.addHook('onRoute', (route) => {
    const pattern = new RegExp(`^${route.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z_]+/g, '[^/]+')}$`)
    for (const method of [route.method].flat()) routes.push({ pattern, method })
  })
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?', 1)[0] ?? ''
    // a page's folder asked without its slash (/ui): sent to it, as a web server does
    if (request.method === 'GET' && !path.endsWith('/') && routes.some((r) => r.method === 'GET' && r.pattern.test(`${path}/`))) {
      void reply.redirect(`${path}/`, 301)
      return
    }
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))]
    if (allowed.length > 0) {
      void reply.header('allow', allowed.join(', '))
      answer(reply, 'method_not_allowed', `${request.method} is not allowed on ${path}; use ${allowed.join(' or ')}`)
      return
    }
    answer(reply, 'not_found', `no route for ${request.method} ${path}`)
  })

  app.setErrorHandler((error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    // A store that cannot be reached is a 503 to retry; why is logged, never sent.
    if (error instanceof StoreError) {
      request.log.error({ err: error, event: 'store_unavailable' }, 'the store failed')
      error = new StoreUnavailableError(`the record store cannot be ${error.failed ?? 'read or written'} right now`, error)
    }
    // Every error the service means to answer with carries its kind, whose status and type one table gives.
    if (error instanceof GatewayError) {
      if (error instanceof SummarizerFailedError) {
        request.log.warn(
          { event: 'summarizer_fault', err: error, reason: error.reason, key_name: request.keyName || undefined },
          'summarizer failed, no fallback'
        )
      }
      void reply
        .code(error.status)
        .headers(error.headers)
        .send(errorBody(error.type, error.message, error.path))
      return
    }
    const fe = error as FastifyError & { validation?: AjvIssue[]; validationContext?: string }
    if (fe.validation && fe.validation.length > 0) {
      const { message, path } = describeValidation(fe.validation, fe.validationContext ?? 'body')
      answer(reply, 'invalid_request', message, path)
      return
    }
    const status = typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500 ? fe.statusCode : 500
    if (status < 500) {
      const headers = (fe as { headers?: Record<string, string> }).headers ?? {}
      void reply
        .code(status)
        .headers(headers)
        .send(errorBody(errorTypeOf(status), instead(fe, request)))
      return
    }
    // 5xx details stay in the log; the client gets a stable, uninformative message.
    request.log.error({ err: error, method: request.method, url: loggableUrl(request.url) }, 'unhandled error')
    answer(reply, 'internal', 'internal error')
  })
}

/** Fastify's own words for a client's mistake, with what to send instead where they do not say it. */
function instead(error: FastifyError, request: FastifyRequest): string {
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    const sent = request.headers['content-type']
    return `the body must be JSON: send it with content-type: application/json${sent ? ` (it came as ${sent.split(';')[0]})` : ' (it came with none)'}`
  }
  if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return 'the body is empty: send a JSON object, or no content-type header with no body'
  return error.message
}

/** The one error shape for every answer that is not a success (the root's error and not-found handlers). */
export const errorHandlingPlugin = fp(async (app) => installErrorHandling(app), { name: 'error-handling' })
