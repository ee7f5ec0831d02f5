/**
 * One root for every error a client can be answered with, in the Anthropic SDK's style: each carries
 * its HTTP status and its error type, and the HTTP layer answers any of them the same way. The type
 * follows from the status by one table; a subclass names what went wrong.
 */
export const ERROR_TYPE_BY_STATUS: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  408: 'timeout_error',
  413: 'request_too_large',
  414: 'invalid_request_error',
  415: 'invalid_request_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error',
  502: 'api_error',
  503: 'overloaded_error'
}

export function errorTypeOf(status: number): string {
  return ERROR_TYPE_BY_STATUS[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
}

export class GatewayError extends Error {
  readonly type: string

  constructor(
    readonly status: number,
    message: string,
    readonly options: { path?: string; headers?: Record<string, string>; type?: string; cause?: unknown } = {}
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.type = options.type ?? errorTypeOf(status)
  }

  get path(): string | undefined {
    return this.options.path
  }

  get headers(): Record<string, string> {
    return this.options.headers ?? {}
  }
}
