/**
 * One root for every error a client can be answered with, in the Anthropic SDK's style: each carries
 * its kind, whose HTTP status and error type one table gives (ERROR_KINDS), and the HTTP layer answers
 * any of them the same way; a subclass names what went wrong.
 */
/** The error types a client can be answered with: the Anthropic API's, from which its SDKs choose their classes. */
export const ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'request_too_large',
  'rate_limit_error',
  'timeout_error',
  'api_error',
  'overloaded_error'
] as const
export type ErrorType = (typeof ERROR_TYPES)[number]

/**
 * Every kind of error the service answers with, and its status and type: the one table. A status may serve
 * two kinds (503: the service is overloaded, or its store cannot be reached), a kind never two statuses.
 */
export const ERROR_KINDS = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  authentication: { status: 401, type: 'authentication_error' },
  permission: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'timeout_error' },
  request_too_large: { status: 413, type: 'request_too_large' },
  uri_too_long: { status: 414, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  invalid_history: { status: 422, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  cancelled: { status: 499, type: 'api_error' },
  internal: { status: 500, type: 'api_error' },
  upstream_failed: { status: 502, type: 'api_error' },
  overloaded: { status: 503, type: 'overloaded_error' },
  store_unavailable: { status: 503, type: 'api_error' },
  upstream_timeout: { status: 504, type: 'timeout_error' }
} as const satisfies Record<string, { status: number; type: ErrorType }>
export type ErrorKind = keyof typeof ERROR_KINDS

/** The type of an error known only by its status (a framework's): that of the first kind with the status. */
export function errorTypeOf(status: number): ErrorType {
  const kind = Object.values(ERROR_KINDS).find((k) => k.status === status)
  return kind?.type ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
}

export class GatewayError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly options: { path?: string; headers?: Record<string, string>; cause?: unknown } = {}
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
  }

  get status(): number {
    return ERROR_KINDS[this.kind].status
  }

  /** Fastify reads an error's status from here. */
  get statusCode(): number {
    return this.status
  }

  get type(): ErrorType {
    return ERROR_KINDS[this.kind].type
  }

  get path(): string | undefined {
    return this.options.path
  }

  get headers(): Record<string, string> {
    return this.options.headers ?? {}
  }
}

/** Tells the SDKs not to retry: a setting to fix or a request to change, not a fault a retry could outlast. */
export const NO_RETRY: Readonly<Record<string, string>> = { 'x-should-retry': 'false' }

/** The request is not one the service can take; `path` names the place. */
export class InvalidRequestError extends GatewayError {
  constructor(message: string, path?: string, headers?: Record<string, string>) {
    super('invalid_request', message, { ...(path !== undefined ? { path } : {}), ...(headers ? { headers } : {}) })
  }
}

/** No key, or a wrong one: with a Bearer challenge. */
export class AuthenticationError extends GatewayError {
  constructor(message: string) {
    super('authentication', message, { headers: { 'www-authenticate': 'Bearer realm="compaction-gateway"' } })
  }
}

export class NotFoundError extends GatewayError {
  constructor(message: string, path?: string) {
    super('not_found', message, path !== undefined ? { path } : {})
  }
}

export class UnsupportedMediaTypeError extends GatewayError {
  constructor(message: string) {
    super('unsupported_media_type', message)
  }
}

/** Too many requests (or failed authentications): retry after `retryAfterS` seconds. */
export class RateLimitError extends GatewayError {
  constructor(message: string, retryAfterS: number) {
    super('rate_limited', message, { headers: { 'retry-after': String(retryAfterS) } })
  }
}

/** A fault of the service's own configuration: the SDKs are told not to retry it. */
export class ConfigurationError extends GatewayError {
  constructor(message: string) {
    super('internal', message, { headers: NO_RETRY })
  }
}

/** The store could not be read or written: retry in a few seconds. */
export class StoreUnavailableError extends GatewayError {
  constructor(message: string, cause?: unknown) {
    super('store_unavailable', message, { headers: { 'retry-after': '5' }, cause })
  }
}
