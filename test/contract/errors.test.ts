import { describe, expect, it } from 'vitest'
import {
  ERROR_KINDS,
  ERROR_TYPES,
  type ErrorKind,
  GatewayError,
  NO_RETRY,
  RateLimitError,
  StoreUnavailableError,
  errorTypeOf
} from '../../src/contract/errors.js'

describe('the error kinds', () => {
  it('give each kind one status and a type of the closed list, a status two kinds at most', () => {
    const byStatus = new Map<number, string[]>()
    for (const [kind, { status, type }] of Object.entries(ERROR_KINDS)) {
      expect(ERROR_TYPES).toContain(type)
      byStatus.set(status, [...(byStatus.get(status) ?? []), kind])
    }
    for (const kinds of byStatus.values()) expect(kinds.length).toBeLessThanOrEqual(2)
    expect(byStatus.get(503)).toEqual(['overloaded', 'store_unavailable'])
  })

  it('take the Messages API’s error type for each status the gateway answers', () => {
    expect(errorTypeOf(400)).toBe('invalid_request_error')
    expect(errorTypeOf(401)).toBe('authentication_error')
    expect(errorTypeOf(413)).toBe('request_too_large')
    expect(errorTypeOf(429)).toBe('rate_limit_error')
    expect(errorTypeOf(503)).toBe('overloaded_error')
    expect(errorTypeOf(504)).toBe('timeout_error')
  })

  it('fall back by class for a status no kind has', () => {
    expect(errorTypeOf(418)).toBe('invalid_request_error')
    expect(errorTypeOf(507)).toBe('api_error')
  })
})

describe('GatewayError', () => {
  class TeapotError extends GatewayError {
    constructor() {
      super('invalid_request', 'short and stout', { path: '/pot', headers: { 'retry-after': '3' }, cause: 'kettle' })
    }
  }

  it('carries its kind’s status and type, its place, headers and cause, named by its class', () => {
    const err = new TeapotError()
    expect(err).toBeInstanceOf(Error)
    expect(err).toMatchObject({
      kind: 'invalid_request',
      status: 400,
      statusCode: 400,
      type: 'invalid_request_error',
      path: '/pot',
      headers: { 'retry-after': '3' },
      name: 'TeapotError',
      message: 'short and stout',
      cause: 'kettle'
    })
  })

  it('has no place, headers or cause unless given', () => {
    const err = new GatewayError('internal' satisfies ErrorKind, 'x')
    expect(err).toMatchObject({ status: 500, type: 'api_error' })
    expect(err.path).toBeUndefined()
    expect(err.headers).toEqual({})
    expect('cause' in err).toBe(false)
  })

  it('named kinds carry the headers a client acts on', () => {
    expect(new RateLimitError('slow down', 7).headers).toEqual({ 'retry-after': '7' })
    expect(new StoreUnavailableError('down')).toMatchObject({ status: 503, type: 'api_error', headers: { 'retry-after': '5' } })
    expect(NO_RETRY).toEqual({ 'x-should-retry': 'false' })
  })
})
