import { afterEach, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { MCP_PROTOCOL_VERSIONS } from '../../src/server/routes/mcp.js'
import { testApp } from '../helpers/app.js'
import { assistant, shellStep, user } from '../helpers/history.js'

const KEYS = 'alpha=key-alpha-0123456789abcdef,beta=key-beta-0123456789abcdef'
const as = (name: 'alpha' | 'beta') => ({ authorization: `Bearer key-${name}-0123456789abcdef` })

const apps: App[] = []
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close()
})

async function app(env: Record<string, string> = {}): Promise<App> {
  const a = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_RATE_LIMIT_PER_MIN: '100000', ...env })
  apps.push(a)
  return a
}

async function rpc(a: App, message: unknown, headers: Record<string, string> = as('alpha')) {
  return a.inject({ method: 'POST', url: '/mcp', headers: { ...headers, accept: 'application/json, text/event-stream' }, payload: message as object })
}

/** A history whose old span printed one plain line the task needs later, then enough turns to compact it away. */
function historyWithCodename(): Message[] {
  const log = [...Array.from({ length: 300 }, (_, i) => `INFO worker ${i} ready`), 'INFO the rollout codename is bluefin-7', 'INFO done'].join('\n')
  return [
    user('read the deploy log and tell me when the workers are up'),
    ...shellStep('toolu_log', 'cat deploy.log', log),
    assistant('the workers are up'),
    ...Array.from({ length: 6 }, (_, i) => [user(`step ${i}: refactor module ${i}`), assistant(`done with module ${i}`)]).flat()
  ]
}

describe('the MCP server (POST /mcp)', () => {
  it("initializes in the client's protocol version, lists its one tool, and answers a recall with the exact line a compaction removed", async () => {
    const a = await app()
    const compacted = await a.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: as('alpha'),
      payload: { mode: 'manual', session_id: 'sess-mcp', keep_turns: 1, messages: historyWithCodename() }
    })
    expect(compacted.statusCode, compacted.body).toBe(200)

    const init = await rpc(a, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }
    })
    expect(init.statusCode).toBe(200)
    expect(init.json()).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'compaction-gateway' } }
    })
    // a version it does not know: its newest
    const newer = await rpc(a, { jsonrpc: '2.0', id: 2, method: 'initialize', params: { protocolVersion: '2099-01-01' } })
    expect(newer.json().result.protocolVersion).toBe(MCP_PROTOCOL_VERSIONS[0])
    expect((await rpc(a, { jsonrpc: '2.0', method: 'notifications/initialized' })).statusCode).toBe(202)

    const listed = (await rpc(a, { jsonrpc: '2.0', id: 3, method: 'tools/list' })).json()
    expect(listed.result.tools.map((t: { name: string }) => t.name)).toEqual(['recall'])
    expect(listed.result.tools[0].inputSchema.required).toEqual(['session', 'query'])

    const called = (
      await rpc(a, {
        jsonrpc: '2.0',
        id: 'c1',
        method: 'tools/call',
        params: { name: 'recall', arguments: { session: 'sess-mcp', query: 'rollout codename' } }
      })
    ).json()
    expect(called.id).toBe('c1')
    expect(called.result.isError).toBe(false)
    const text = called.result.content[0].text as string
    expect(text).toContain('INFO the rollout codename is bluefin-7')
    expect(text.split('\n')[0]).toMatch(/^\[1\] \(output, compaction cmp_\w+, messages? [\d-]+, lines \d+-\d+\)$/)

    // another tenant's key reaches nothing of it
    const theirs = (
      await rpc(
        a,
        { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'recall', arguments: { session: 'sess-mcp', query: 'rollout codename' } } },
        as('beta')
      )
    ).json()
    expect(theirs.result.content[0].text).toMatch(/^Nothing kept/)
  })

  it("is behind the gateway's keys without sending a client to look for OAuth, and refuses what is not one JSON-RPC request, naming it", async () => {
    const a = await app()
    const anonymous = await a.inject({ method: 'POST', url: '/mcp', payload: { jsonrpc: '2.0', id: 1, method: 'ping' } })
    expect(anonymous.statusCode).toBe(401)
    // a plain challenge: no protected-resource metadata to discover an authorization server from
    expect(String(anonymous.headers['www-authenticate'])).not.toContain('resource_metadata')
    expect((await a.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource', headers: as('alpha') })).statusCode).toBe(404)
    expect((await a.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server', headers: as('alpha') })).statusCode).toBe(404)

    expect((await rpc(a, { jsonrpc: '2.0', id: 1, method: 'ping' })).json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} })
    expect((await rpc(a, { jsonrpc: '2.0', id: 2, method: 'resources/list' })).json().error).toEqual({ code: -32601, message: 'no method "resources/list"' })
    expect((await rpc(a, [{ jsonrpc: '2.0', id: 3, method: 'ping' }])).json().error.code).toBe(-32600)
    expect((await rpc(a, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'expand_context', arguments: {} } })).json().error.message).toContain(
      'no tool "expand_context"'
    )
    const missing = (await rpc(a, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'recall', arguments: { query: 'x' } } })).json()
    expect(missing.result).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringContaining('session is missing') }] })
    const get = await a.inject({ method: 'GET', url: '/mcp', headers: as('alpha') })
    expect(get.statusCode).toBe(405)
    expect(get.headers.allow).toBe('POST')
  })

  it('is not served with COMPACT_RECALL=off', async () => {
    const a = await app({ COMPACT_RECALL: 'off' })
    expect((await rpc(a, { jsonrpc: '2.0', id: 1, method: 'ping' })).statusCode).toBe(404)
  })
})
