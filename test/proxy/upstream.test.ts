import { errors } from 'undici'
import { describe, expect, it } from 'vitest'
import { UpstreamError, clientHeaders, upstreamFault, upstreamHeaders } from '../../src/proxy/upstream.js'

describe('the headers a proxied request carries', () => {
  it("drops the client's address headers, which any client could write: the gateway calls the upstream as its own client", () => {
    const sent = upstreamHeaders(
      {
        forwarded: 'for=10.0.0.1;proto=https',
        'x-forwarded-for': '203.0.113.9, 10.0.0.1',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-proto': 'https',
        'x-forwarded-port': '443',
        'x-real-ip': '203.0.113.9',
        'true-client-ip': '203.0.113.9',
        via: '1.1 someproxy',
        'anthropic-version': '2023-06-01'
      },
      { 'x-api-key': 'sk-ant-upstream' }
    )
    expect(sent).toEqual({ 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'x-api-key': 'sk-ant-upstream' })
  })

  it("sends the Messages API's headers and the given credentials, never the client's key, cookies or host", () => {
    const sent = upstreamHeaders(
      {
        'x-api-key': 'gateway-key',
        authorization: 'Bearer gateway-key',
        cookie: 'a=b',
        host: 'gateway.local',
        'anthropic-version': '2023-06-01',
        'anthropic-beta': ['a-1', 'b-2'],
        'x-stainless-lang': 'js',
        'x-compaction-budget': '9000',
        'content-type': 'application/json; charset=utf-8',
        'accept-encoding': 'gzip'
      },
      { 'x-api-key': 'sk-ant-upstream' }
    )
    expect(sent).toEqual({
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'a-1, b-2',
      'x-stainless-lang': 'js',
      'content-type': 'application/json',
      'x-api-key': 'sk-ant-upstream'
    })
  })

  it("passes every end-to-end header an agent sends, and none that the client's connection names as its hop's", () => {
    const sent = upstreamHeaders(
      {
        'x-app': 'cli',
        'x-claude-code-session-id': '4b20',
        'anthropic-dangerous-direct-browser-access': 'true',
        'user-agent': 'claude-cli/2.1.332',
        'x-session-affinity': 'ses_1',
        connection: 'keep-alive, x-hop-secret',
        'x-hop-secret': 'hop',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        'content-length': '12',
        'x-compaction-session': 's',
        'proxy-authorization': 'Basic x'
      },
      { 'x-api-key': 'sk-ant-upstream' }
    )
    expect(sent).toEqual({
      'x-app': 'cli',
      'x-claude-code-session-id': '4b20',
      'anthropic-dangerous-direct-browser-access': 'true',
      'user-agent': 'claude-cli/2.1.332',
      'x-session-affinity': 'ses_1',
      'content-type': 'application/json',
      'x-api-key': 'sk-ant-upstream'
    })
  })

  it('gives back every response header but those of a single hop', () => {
    expect(
      clientHeaders({
        'retry-after': '7',
        'request-id': 'req_1',
        'content-type': 'text/event-stream',
        connection: 'keep-alive',
        'transfer-encoding': 'chunked',
        'content-length': '10',
        'set-cookie': ['a', 'b']
      })
    ).toEqual({
      'retry-after': '7',
      'request-id': 'req_1',
      'content-type': 'text/event-stream',
      'set-cookie': ['a', 'b']
    })
  })
})

describe('upstreamFault', () => {
  it('answers a silence with 504 and an unreachable upstream with 502, and passes an abort on as it is', () => {
    const timeout = upstreamFault(new errors.HeadersTimeoutError()) as UpstreamError
    expect(timeout).toBeInstanceOf(UpstreamError)
    expect([timeout.status, timeout.type]).toEqual([504, 'timeout_error'])
    const refused = upstreamFault(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })) as UpstreamError
    expect([refused.status, refused.type, refused.message]).toEqual([502, 'api_error', 'the Messages API could not be reached (ECONNREFUSED)'])
    const aborted = new errors.RequestAbortedError()
    expect(upstreamFault(aborted)).toBe(aborted)
  })
})
