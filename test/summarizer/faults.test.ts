import Anthropic from '@anthropic-ai/sdk'
import { describe, expect, it } from 'vitest'
import { SummarizerFault, faultOf } from '../../src/summarizer/faults.js'

const api = (status: number) =>
  Anthropic.APIError.generate(status, { type: 'error', error: { type: 'x', message: `status ${status}` } }, undefined, new Headers())

describe('faultOf', () => {
  it.each([
    [400, 'bad_request'],
    [401, 'auth_error'],
    [403, 'auth_error'],
    [404, 'bad_request'],
    [413, 'bad_request'],
    [429, 'rate_limited'],
    [500, 'server_error'],
    [503, 'server_error'],
    [529, 'overloaded']
  ])('names an SDK error with status %i %s, keeping it as the cause', (status, reason) => {
    const err = api(status)
    const fault = faultOf(err)
    expect(fault.reason).toBe(reason)
    expect(fault.cause).toBe(err)
  })

  it('names timeouts, aborts and connection failures', () => {
    expect(faultOf(new Anthropic.APIConnectionTimeoutError()).reason).toBe('timeout')
    expect(faultOf(new Anthropic.APIUserAbortError()).reason).toBe('cancelled')
    expect(faultOf(new Anthropic.APIConnectionError({ message: 'ECONNREFUSED' })).reason).toBe('connection_error')
  })

  it('passes a fault through as it is, and names anything else a server error with its message', () => {
    const fault = new SummarizerFault('refusal', 'the model refused')
    expect(faultOf(fault)).toBe(fault)
    expect(faultOf(new TypeError('boom'))).toMatchObject({ reason: 'server_error', message: 'boom', name: 'SummarizerFault' })
    expect(faultOf('a string').message).toBe('a string')
  })
})
