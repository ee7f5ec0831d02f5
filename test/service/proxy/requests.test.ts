import { afterEach, describe, expect, it } from 'vitest'
import type { App } from '../../../src/server/app.js'
import { ProxiedBody } from '../../../src/proxy/body.js'
import { readMessagesRequest } from '../../../src/proxy/request.js'
import { withMessages } from '../../../src/contract/wire.js'
import { ConfigurationError, InvalidRequestError } from '../../../src/contract/errors.js'
import type { ProxiedAsk, ProxiedDialect } from '../../../src/service/proxy/requests.js'
import { testApp } from '../../helpers/app.js'
import { shellStep, user } from '../../helpers/history.js'

/** The Messages API as the service sees it (its route's own dialect). */
const messages: ProxiedDialect<undefined> = {
  endpoint: 'messages',
  name: 'the Messages API',
  read: (body) => ({ parts: readMessagesRequest(body.value()), read: undefined }),
  write: (body, _read, outcome) => withMessages(body.value() as object, outcome?.messages ?? (body.value() as { messages: unknown[] }).messages),
  contextManagement: true,
  usage: 'messages'
}

const long = [
  user('Fix the flaky retry test in src/net/retry.ts'),
  ...Array.from({ length: 40 }, (_, i) => shellStep(`toolu_${i}`, `npm test -- retry ${i}`, `run ${i}\n${'o'.repeat(800)}`)).flat(),
  { role: 'assistant' as const, content: 'Every run passes now.' },
  user('go on')
]

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined }

let app: App | undefined
afterEach(async () => {
  await app?.close()
  app = undefined
})

function ask(
  body: string,
  headers: Record<string, string> = {},
  forwardHeaders: () => Record<string, string> = () => ({ 'x-api-key': 'sk-ant-test' })
): ProxiedAsk {
  return {
    body: new ProxiedBody(Buffer.from(body)),
    headers,
    keyName: 'team',
    policy: app!.proxy.policy.messages,
    forwardHeaders,
    hangUp: new AbortController(),
    log: silent,
    started: performance.now()
  }
}

describe('ProxyService', () => {
  it('forwards a body far under its budget as the bytes it came as, unread, under the session its headers name', async () => {
    app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-test' })
    const text = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 100, messages: [user('hi')] })
    const prepared = await app.proxy.service.prepare(messages, ask(text, { 'x-claude-code-session-id': 'sess-1' }))
    expect(prepared.kind).toBe('forward')
    if (prepared.kind !== 'forward') return
    expect(prepared.outcome).toEqual({ kind: 'none', tokens: undefined })
    expect(prepared.payload.toString()).toBe(text)
    expect(prepared.headers['x-api-key']).toBe('sk-ant-test')
    const relayed = prepared.answered(200, performance.now(), 12)
    expect(relayed.line).toMatchObject({ event: 'proxied', endpoint: 'messages', status: 200, compaction: 'none', session_id: 'sess-1', upstream_ms: 12 })
    expect(relayed.rewrite).toBeUndefined()
    expect(relayed.onUsage).toBeInstanceOf(Function)
  })

  it('compacts a body past its budget: the forwarded history shorter, the compaction served and recorded under its session', async () => {
    app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-test', COMPACT_PRECOMPUTE_AT: 'off' })
    const text = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 100, messages: long })
    const prepared = await app.proxy.service.prepare(messages, ask(text, { 'x-compaction-budget': '4000', 'x-claude-code-session-id': 'sess-2' }))
    expect(prepared.kind).toBe('forward')
    if (prepared.kind !== 'forward') return
    expect(prepared.outcome.kind).toBe('compacted')
    expect(prepared.payload.length).toBeLessThan(text.length)
    expect((JSON.parse(prepared.payload.toString()) as { messages: unknown[] }).messages.length).toBeLessThan(long.length)
    await prepared.scheduled.recorded
    // the request on its way: the cold layer's write begins (the session's reads wait for it)
    prepared.scheduled.begin?.()
    const relayed = prepared.answered(200, performance.now(), 5)
    expect(relayed.line).toMatchObject({ compaction: 'compacted', session_id: 'sess-2', source: 'merged' })
    expect(relayed.line.forwarded_tokens).toBeLessThan(relayed.line.estimated_tokens as number)
    const page = await app.store.listRecords('sess-2', 'team', { limit: 10 })
    expect(page.records.map((r) => r.id)).toEqual([(prepared.outcome as { summaryId: string }).summaryId])
  })

  it("checks the gateway's own headers before the credentials: a bad budget is a 400 even where the gateway has no key", async () => {
    app = await testApp()
    const noKey = (): Record<string, string> => {
      throw new ConfigurationError('no key')
    }
    const text = JSON.stringify({ model: 'm', max_tokens: 1, messages: [user('hi')] })
    await expect(app.proxy.service.prepare(messages, ask(text, { 'x-compaction-budget': 'lots' }, noKey))).rejects.toBeInstanceOf(InvalidRequestError)
    await expect(app.proxy.service.prepare(messages, ask(text, {}, noKey))).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('answers a compaction asked to pause itself, with its compaction block alone, once recorded', async () => {
    app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-test', COMPACT_PRECOMPUTE_AT: 'off', COMPACT_CONTEXT_MANAGEMENT: 'gateway' })
    const text = JSON.stringify({
      model: 'claude-sonnet-4-5',
      max_tokens: 100,
      messages: long,
      context_management: { edits: [{ type: 'compact_20260112', trigger: { type: 'input_tokens', value: 4_000 }, pause_after_compaction: true }] }
    })
    const prepared = await app.proxy.service.prepare(messages, ask(text, { 'x-claude-code-session-id': 'sess-3' }))
    expect(prepared.kind).toBe('paused')
    if (prepared.kind !== 'paused') return
    const answer = JSON.parse(prepared.body) as { stop_reason: string; content: { type: string }[] }
    expect(answer.stop_reason).toBe('compaction')
    expect(answer.content.map((b) => b.type)).toEqual(['compaction'])
    prepared.scheduled.begin?.()
    const page = await app.store.listRecords('sess-3', 'team', { limit: 10 })
    expect(page.records.map((r) => r.id)).toEqual([prepared.outcome.summaryId])
  })

  it("refuses a history that breaks the rules of a conversation at its place in the client's body", async () => {
    app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-test' })
    const broken = [...long.slice(0, 20), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nowhere', content: 'x' }] }, ...long.slice(20)]
    const placed: ProxiedDialect<undefined> = { ...messages, place: (_read, path) => `/placed${path}` }
    const text = JSON.stringify({ model: 'm', max_tokens: 1, messages: broken })
    await expect(app.proxy.service.prepare(placed, ask(text, { 'x-compaction-budget': '4000' }))).rejects.toMatchObject({
      options: { path: expect.stringMatching(/^\/placed\/messages\/20\b/) }
    })
  })
})
