import { describe, expect, it } from 'vitest'
import { ERROR_TYPE_BY_STATUS, GatewayError, errorTypeOf } from '../../src/contract/errors.js'

describe('errorTypeOf', () => {
  it('takes the Messages API’s error type for each status the gateway answers', () => {
    expect(errorTypeOf(400)).toBe('invalid_request_error')
    expect(errorTypeOf(401)).toBe('authentication_error')
    expect(errorTypeOf(413)).toBe('request_too_large')
    expect(errorTypeOf(429)).toBe('rate_limit_error')
    expect(errorTypeOf(503)).toBe('overloaded_error')
  })

  it('falls back by class for a status not in the table', () => {
    expect(ERROR_TYPE_BY_STATUS[418]).toBeUndefined()
    expect(errorTypeOf(418)).toBe('invalid_request_error')
    expect(errorTypeOf(504)).toBe('api_error')
  })
})

describe('GatewayError', () => {
  class TeapotError extends GatewayError {
    constructor() {
      super(418, 'short and stout', { path: '/pot', headers: { 'retry-after': '3' }, cause: 'kettle' })
    }
  }

  it('carries its status, its type from the table, its place, headers and cause, named by its class', () => {
    const err = new TeapotError()
    expect(err).toBeInstanceOf(Error)
    expect(err).toMatchObject({ status: 418, type: 'invalid_request_error', path: '/pot', headers: { 'retry-after': '3' }, name: 'TeapotError', message: 'short and stout', cause: 'kettle' })
  })

  it('lets a subclass name its own type, and has no place, headers or cause unless given', () => {
    const err = new GatewayError(500, 'x', { type: 'store_error' })
    expect(err.type).toBe('store_error')
    expect(err.path).toBeUndefined()
    expect(err.headers).toEqual({})
    expect('cause' in err).toBe(false)
  })
})
