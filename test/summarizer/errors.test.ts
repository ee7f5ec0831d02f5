import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/contract/errors.js'
import { OverloadedError, SummarizerFailedError } from '../../src/summarizer/errors.js'

describe('summarizer errors', () => {
  it('a forbidden fallback is a 502 of the gateway’s hierarchy, naming the reason and keeping the cause', () => {
    const cause = new Error('529')
    const err = new SummarizerFailedError('overloaded', { cause })
    expect(err).toBeInstanceOf(GatewayError)
    expect(err).toMatchObject({ status: 502, reason: 'overloaded', name: 'SummarizerFailedError', cause })
    expect(err.message).toContain('(overloaded)')
  })

  it('tells the SDKs to retry a forbidden fallback only where the failure may pass', () => {
    expect(new SummarizerFailedError('overloaded').headers).toEqual({ 'x-should-retry': 'true' })
    expect(new SummarizerFailedError('timeout').headers).toEqual({ 'x-should-retry': 'true' })
    for (const lasting of ['auth_error', 'invalid_output', 'refusal', 'bad_request'])
      expect(new SummarizerFailedError(lasting).headers).toEqual({ 'x-should-retry': 'false' })
  })

  it('an overload is a 503 with Retry-After in seconds', () => {
    const err = new OverloadedError('8 in flight, 16 queued', 7)
    expect(err).toMatchObject({ status: 503, retryAfterS: 7, headers: { 'retry-after': '7' } })
    expect(err.message).toBe('the service is overloaded (8 in flight, 16 queued); retry after 7 s')
  })
})
