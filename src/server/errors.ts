import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { InvalidHistoryError, OverloadedError, SummarizerFailedError, SummarizerUnavailableError } from '../service/errors.js'
import type { ErrorResponseBody } from './schemas.js'

/** An error with its HTTP status and Anthropic-style type, thrown by routes and hooks. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly type: string,
    message: string,
    readonly path?: string,
    readonly headers: Record<string, string> = {}
  ) {
    super(message)
    this.name = 'ApiError'
  }
}

export function errorBody(type: string, message: string, path?: string): ErrorResponseBody {
  return { type: 'error', error: path === undefined ? { type, message } : { type, message, path } }
}

const TYPE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  415: 'invalid_request_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error',
  502: 'api_error',
  503: 'overloaded_error'
}

interface AjvIssue {
  instancePath: string
  message?: string
  keyword: string
  params: Record<string, unknown>
}

/** A schema failure as one sentence that names the place, e.g. `body/messages/3/role must be ...`. */
function describeValidation(issues: readonly AjvIssue[], context: string): { message: string; path: string } {
  const issue = issues[0]!
  let path = issue.instancePath || ''
  let text = issue.message ?? 'is invalid'
  if (issue.keyword === 'additionalProperties') {
    path = `${path}/${String(issue.params.additionalProperty)}`
    text = 'is not a known field'
  } else if (issue.keyword === 'required') {
    path = `${path}/${String(issue.params.missingProperty)}`
    text = 'is required'
  } else if (issue.keyword === 'enum') {
    text = `must be one of ${(issue.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`
  } else if (issue.keyword === 'const' || issue.keyword === 'anyOf') {
    const allowed = issues.filter((i) => i.instancePath === issue.instancePath && i.keyword === 'const').map((i) => JSON.stringify(i.params.allowedValue))
    text = allowed.length > 0 ? `must be one of ${allowed.join(', ')}` : text
  }
  const where = path === '' ? context : `${context}${path.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.')}`
  return { message: `${where} ${text}`, path: path === '' ? '/' : path }
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    void reply.code(404).send(errorBody('not_found_error', `no route for ${request.method} ${request.url.split('?')[0]}`))
  })

  app.setErrorHandler((error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof ApiError) {
      void reply.code(error.statusCode).headers(error.headers).send(errorBody(error.type, error.message, error.path))
      return
    }
    if (error instanceof InvalidHistoryError) {
      const status = error.problem.kind === 'shape' ? 400 : 422
      void reply.code(status).send(errorBody('invalid_request_error', error.problem.message, error.problem.path))
      return
    }
    if (error instanceof SummarizerUnavailableError) {
      void reply.code(400).send(errorBody('invalid_request_error', error.message, '/summarizer'))
      return
    }
    if (error instanceof OverloadedError) {
      void reply.code(503).header('retry-after', String(error.retryAfterS)).send(errorBody('overloaded_error', error.message))
      return
    }
    if (error instanceof SummarizerFailedError) {
      request.log.warn({ err: error, reason: error.reason }, 'summarizer failed, no fallback')
      void reply.code(502).send(errorBody('api_error', error.message))
      return
    }
    const fe = error as FastifyError & { validation?: AjvIssue[]; validationContext?: string }
    if (fe.validation && fe.validation.length > 0) {
      const { message, path } = describeValidation(fe.validation, fe.validationContext ?? 'body')
      void reply.code(400).send(errorBody('invalid_request_error', message, path))
      return
    }
    const status = typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500 ? fe.statusCode : 500
    if (status < 500) {
      const headers = (fe as { headers?: Record<string, string> }).headers ?? {}
      void reply.code(status).headers(headers).send(errorBody(TYPE_BY_STATUS[status] ?? 'invalid_request_error', fe.message))
      return
    }
    // 5xx details stay in the log; the client gets a stable, uninformative message.
    request.log.error({ err: error, method: request.method, url: request.url }, 'unhandled error')
    void reply.code(500).send(errorBody('api_error', 'internal error'))
  })
}
