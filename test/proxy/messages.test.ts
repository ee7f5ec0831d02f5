import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { createServer, request } from 'node:http'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { RECALL_TOOL_DEFINITION } from '../../src/proxy/recall-tool.js'
import { type Message, validateHistory } from '../../src/compaction/index.js'
import { type App, buildApp } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'
import { capturedLog, testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, call, shellStep, user } from '../helpers/history.js'
import { ROOT } from '../helpers/process.js'
import { until } from '../helpers/wait.js'

const UPSTREAM_KEY = 'sk-ant-upstream-proxy-test-0000000000'
const GATEWAY_KEY = 'gw-proxy-test-key-1'

/** A coding session: a task, then `steps` shell steps with outputs of `chars` characters each, then a new request. */
function session(steps: number, chars = 2_000, tag = 'a'): Message[] {
  const messages: Message[] = [user(`Fix the failing parser test in src/parse_${tag}.ts`)]
  for (let i = 0; i < steps; i++) messages.push(...shellStep(`toolu_${tag}_${i}`, `cat src/module_${i}.ts`, `line ${i}: ${'x'.repeat(chars)}`))
  messages.push(assistant(`Read ${steps} modules.`), user('Now update docs/parser.md to match'))
  return messages
}

const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')
const proxied = (fake: FakeAnthropic): ReceivedRequest[] => fake.requests.filter((r) => !isSummaryCall(r))

describe('POST /v1/messages: a drop-in proxy for Messages API clients', () => {
  let fake: FakeAnthropic
  let app: App
  let url: string
  let sdk: Anthropic

  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    app = await testApp({
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `alice=${GATEWAY_KEY}`,
      COMPACT_PRECOMPUTE_AT: 'off'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    sdk = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: url, maxRetries: 0 })
  })
  afterAll(async () => {
    await app.close()
    await fake.close()
  })
  afterEach(() => {
    fake.requests.length = 0
    fake.refused.length = 0
    fake.fallback = (r) => (isSummaryCall(r) ? { toolInput: { objective: 'Fix the failing parser test' } } : { text: 'Hello from the upstream.' })
  })

  it('answers the real SDK with the upstream message, forwarding with the gateway key and never the client key', async () => {
    fake.fallback = { text: 'Hello from the upstream.' }
    const { data, response } = await sdk.messages
      .create({ model: 'claude-test', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'anthropic-beta': 'test-beta-2026' } })
      .withResponse()
    expect(data.content).toEqual([{ type: 'text', text: 'Hello from the upstream.' }])
    expect(response.headers.get('x-compaction')).toBe('none')
    const [sent] = fake.requests
    expect(sent?.headers['x-api-key']).toBe(UPSTREAM_KEY)
    expect(sent?.headers.authorization).toBeUndefined()
    expect(JSON.stringify(sent?.headers)).not.toContain(GATEWAY_KEY)
    expect(sent?.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/)
    expect(sent?.headers['anthropic-beta']).toBe('test-beta-2026')
  })

  it('forwards a body under the budget byte for byte: spacing, key order and unknown fields as sent', async () => {
    fake.fallback = { text: 'ok' }
    const raw = `{"max_tokens": 16,  "model":"claude-test","messages":[{"role":"user","content":"h\\u00e9llo"}],"zz_future_field":{"a":[1,2.50,3]}, "metadata":{"user_id":"u-1"}}`
    const res = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'anthropic-version': '2023-06-01' },
      body: raw
    })
    expect(res.status).toBe(200)
    expect(fake.requests[0]?.raw).toBe(raw)
  })

  it('streams with messages.stream: the events arrive as the upstream sends them', async () => {
    fake.fallback = { text: 'Streamed answer, piece by piece.', eventDelayMs: 40 }
    const stream = sdk.messages.stream({ model: 'claude-test', max_tokens: 64, messages: [{ role: 'user', content: 'stream please' }] })
    const deltas: string[] = []
    let firstDeltaAt = 0
    stream.on('text', (t) => {
      firstDeltaAt ||= performance.now()
      deltas.push(t)
    })
    const final = await stream.finalMessage()
    // The first piece reached the client before the upstream had written its last: nothing was held back.
    expect(firstDeltaAt).toBeGreaterThan(0)
    expect(firstDeltaAt).toBeLessThan(fake.lastEventAt)
    expect(final.content).toEqual([{ type: 'text', text: 'Streamed answer, piece by piece.' }])
    expect(deltas.length).toBeGreaterThan(3)
    expect(fake.requests[0]?.body.stream).toBe(true)
  })

  it('compacts an over-budget history before forwarding it: tool pairs intact, the newest message as sent', async () => {
    const history = session(40)
    const { data, response } = await sdk.messages
      .create(
        { model: 'claude-test', max_tokens: 64, messages: history as Anthropic.MessageParam[] },
        { headers: { 'x-compaction-budget': '6000', 'x-compaction-session': 'proxy-s1' } }
      )
      .withResponse()
    expect(data.content).toEqual([{ type: 'text', text: 'Hello from the upstream.' }])
    expect(response.headers.get('x-compaction')).toBe('compacted')
    const summaryId = response.headers.get('x-compaction-summary-id')
    expect(summaryId).toMatch(/^cmp_/)
    // the crossing waited for no model: its summary is merged from the ledger, the task and files in it
    expect(fake.requests.filter(isSummaryCall)).toHaveLength(0)
    const [sent] = proxied(fake)
    const messages = sent!.body.messages as unknown as Message[]
    expect(messages.length).toBeLessThan(history.length)
    expect(validateHistory(messages)).toBeUndefined()
    expect(messages.at(-1)).toEqual(history.at(-1))
    expect(JSON.stringify(messages[0])).toContain('Fix the failing parser test in src/parse_a.ts')
    expect(JSON.stringify(messages[0])).toContain('src/module_0.ts')
    expect(sent!.body.model).toBe('claude-test')
    expect(sent!.body.max_tokens).toBe(64)
    // The record is kept under the session, like /v1/compact's.
    const records = await fetch(`${url}/v1/sessions/proxy-s1/compactions`, { headers: { 'x-api-key': GATEWAY_KEY } })
    const listed = (await records.json()) as { compactions: { id: string }[] }
    expect(listed.compactions.map((c) => c.id)).toContain(summaryId)
  })

  it('keeps a conversation whose client names no session on record under a stable id of its own: listed, recorded, recalled', async () => {
    const history = session(40, 2_000, 'nosession')
    const options = { headers: { 'x-compaction-budget': '6000' } }
    const first = await sdk.messages.create({ model: 'claude-test', max_tokens: 64, messages: history as Anthropic.MessageParam[] }, options).withResponse()
    expect(first.response.headers.get('x-compaction')).toBe('compacted')
    const grown = [...history, assistant('Updated the docs.'), user('Thanks; run the tests once more')]
    await sdk.messages.create({ model: 'claude-test', max_tokens: 64, messages: grown as Anthropic.MessageParam[] }, options)
    const other = session(40, 2_000, 'another')
    await sdk.messages.create({ model: 'claude-test', max_tokens: 64, messages: other as Anthropic.MessageParam[] }, options)
    const headers = { 'x-api-key': GATEWAY_KEY }
    const listed = (await (await fetch(`${url}/v1/sessions?limit=100`, { headers })).json()) as { sessions: { session_id: string; compactions: number }[] }
    const derived = listed.sessions.filter((s) => s.session_id.startsWith('conv-'))
    // one id per conversation, the same for every request of it
    expect(derived).toHaveLength(2)
    const mine = await Promise.all(
      derived.map(async (s) => ({
        s,
        records: (await (await fetch(`${url}/v1/sessions/${s.session_id}/compactions`, { headers })).json()) as { compactions: { id: string }[] }
      }))
    )
    const own = mine.find((m) => m.records.compactions.some((c) => c.id === first.response.headers.get('x-compaction-summary-id')))
    expect(own).toBeDefined()
    const recall = await fetch(`${url}/v1/sessions/${own!.s.session_id}/recall`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'module_3' })
    })
    expect(recall.status).toBe(200)
    expect(((await recall.json()) as { results: unknown[] }).results.length).toBeGreaterThan(0)
  })

  it('sends the same summary turn on the next request of the session, so the prompt prefix stays the same', async () => {
    const history = session(40, 2_000, 'b')
    const options = { headers: { 'x-compaction-budget': '6000', 'x-compaction-session': 'proxy-s2' } }
    const first = await sdk.messages.create({ model: 'claude-test', max_tokens: 64, messages: history as Anthropic.MessageParam[] }, options).withResponse()
    const grown = [...history, assistant('Updated the docs.'), user('Thanks; run the tests once more')]
    const second = await sdk.messages.create({ model: 'claude-test', max_tokens: 64, messages: grown as Anthropic.MessageParam[] }, options).withResponse()
    expect(second.response.headers.get('x-compaction-summary-id')).toBe(first.response.headers.get('x-compaction-summary-id'))
    expect(fake.requests.filter(isSummaryCall)).toHaveLength(0)
    const [a, b] = proxied(fake)
    const sentA = a!.body.messages
    const sentB = b!.body.messages
    expect(JSON.stringify(sentB.slice(0, sentA.length))).toBe(JSON.stringify(sentA))
    expect(sentB.slice(sentA.length)).toEqual(grown.slice(history.length))
  })

  it('refuses a gateway header it cannot use on every request, naming it, also on a body it would forward unread', async () => {
    for (const [name, value] of [
      ['x-compaction-session', 's'.repeat(250)],
      ['x-compaction-session', ' '],
      ['x-compaction-budget', 'lots']
    ] as const) {
      const res = await fetch(`${url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, [name]: value },
        body: JSON.stringify({ model: 'claude-test', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      })
      expect(res.status, `${name}: ${value.slice(0, 10)}`).toBe(400)
      const body = (await res.json()) as { error: { message: string } }
      expect(body.error.message).toContain(name)
    }
    expect(proxied(fake)).toHaveLength(0)
  })

  it('refuses a wrong key before any upstream call', async () => {
    const stranger = new Anthropic({ apiKey: 'not-a-gateway-key', baseURL: url, maxRetries: 0 })
    const err = await stranger.messages.create({ model: 'claude-test', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(fake.requests).toHaveLength(0)
  })

  it("gives back the upstream's errors with their status, body and retry-after: a 529 is a 529", async () => {
    fake.fallback = { status: 529, errorType: 'overloaded_error', headers: { 'retry-after': '7' } }
    const err = await sdk.messages.create({ model: 'claude-test', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.APIError)
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(529)
    const res = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY },
      body: JSON.stringify({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
    })
    expect(res.status).toBe(529)
    expect(res.headers.get('retry-after')).toBe('7')
    expect(await res.json()).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'fake 529' } })
  })

  it('forwards count_tokens the same way', async () => {
    const counted = await sdk.messages.countTokens({ model: 'claude-test', messages: [{ role: 'user', content: 'count me' }] })
    expect(counted.input_tokens).toBeGreaterThan(0)
    expect(fake.requests[0]?.path).toBe('/v1/messages/count_tokens')
    expect(fake.requests[0]?.headers['x-api-key']).toBe(UPSTREAM_KEY)
  })

  it('gives an answer it relays the headers every answer carries: its request id and the rate limit', async () => {
    for (const stream of [false, true]) {
      const res = await fetch(`${url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY },
        body: JSON.stringify({ model: 'm', max_tokens: 8, stream, messages: [{ role: 'user', content: 'hi' }] })
      })
      expect(res.status).toBe(200)
      expect(res.headers.get('x-request-id'), `stream: ${stream}`).toMatch(/^[0-9a-f-]{36}$/)
      expect(res.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/)
      expect(res.headers.get('x-compaction')).toBe('none')
      expect(res.headers.get('content-type')).toContain(stream ? 'text/event-stream' : 'application/json')
      expect(await res.text()).toContain(stream ? 'event: message_stop' : 'Hello from the upstream.')
    }
  })

  it('ends a stream the upstream breaks off with an error event the SDK reports', async () => {
    fake.fallback = { text: 'This answer will not finish because the connection drops.', breakAfterEvents: 4, eventDelayMs: 10 }
    const stream = sdk.messages.stream({ model: 'claude-test', max_tokens: 64, messages: [{ role: 'user', content: 'go' }] })
    const err = await stream.finalMessage().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Error)
    expect(String(err)).toMatch(/broke off/)
  })

  it('puts its error event after a whole event when the upstream breaks off inside one, at every byte', async () => {
    for (const at of [1, 7, 20, 45, 80]) {
      fake.fallback = { text: 'This answer will not finish because the connection drops.', breakAfterEvents: 4, breakInsideEventAt: at }
      const stream = sdk.messages.stream({ model: 'claude-test', max_tokens: 64, messages: [{ role: 'user', content: 'go' }] })
      const err = await stream.finalMessage().catch((e: unknown) => e)
      expect(String(err), `cut at byte ${at}`).toMatch(/broke off/)
      expect(String(err)).not.toMatch(/JSON|Unterminated|Unexpected/)
    }
  })

  it('aborts the upstream request when the client goes away mid-stream', async () => {
    fake.fallback = { text: 'a long answer '.repeat(40), eventDelayMs: 50 }
    const before = fake.aborted
    const client = new AbortController()
    const res = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY },
      body: JSON.stringify({ model: 'm', max_tokens: 1, stream: true, messages: [{ role: 'user', content: 'x' }] }),
      signal: client.signal
    })
    const reader = res.body!.getReader()
    await reader.read()
    client.abort()
    for (let i = 0; i < 100 && fake.aborted === before; i++) await new Promise((r) => setTimeout(r, 20))
    expect(fake.aborted).toBe(before + 1)
  })

  it('names the place of a body it cannot read, in the Messages error shape', async () => {
    // a body that may be compacted is read; one far under its budget goes on unread (the next test)
    const long = 'x'.repeat(4_000)
    const res = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'x-compaction-budget': '1000' },
      body: JSON.stringify({
        model: 'm',
        messages: [
          { role: 'user', content: long },
          { role: 'robot', content: 'y' }
        ]
      })
    })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'body.messages[1].role must be one of "user", "assistant", "system"', path: '/messages/1/role' }
    })
    const budget = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'x-compaction-budget': 'lots' },
      body: JSON.stringify({ model: 'm', messages: [] })
    })
    expect(budget.status).toBe(400)
    expect(((await budget.json()) as { error: { message: string } }).error.message).toMatch(/x-compaction-budget/)
    const notJson = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'x-compaction-budget': '1000' },
      body: `{"messages": [${'1,'.repeat(2_000)}`
    })
    expect(notJson.status).toBe(400)
    expect(((await notJson.json()) as { error: { message: string } }).error.message).toMatch(/not valid JSON/)
    expect(fake.requests).toHaveLength(0)
  })

  it('refuses a block the estimate cannot read with a 400 naming it, on both endpoints, never a 500', async () => {
    const pad = user('p'.repeat(8_000))
    const histories = [
      [pad, assistant(call('t', 'bash', {})), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [null] }] }],
      [
        pad,
        assistant({ type: 'tool_use', id: 't', name: { a: 1 }, input: {} }),
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }] }
      ]
    ]
    const paths = ['/messages/2/content/0/content/0', '/messages/1/content/0']
    for (const [k, messages] of histories.entries()) {
      for (const endpoint of ['/v1/messages', '/v1/messages/count_tokens']) {
        const res = await fetch(`${url}${endpoint}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'x-compaction-budget': '1000' },
          body: JSON.stringify({ model: 'm', max_tokens: 1, messages })
        })
        expect(res.status, endpoint).toBe(400)
        expect(((await res.json()) as { error: { path: string } }).error.path).toBe(paths[k])
      }
    }
    expect(fake.requests).toHaveLength(0)
  })

  it("forwards a body far under its budget unread, byte for byte: what it holds is the upstream's to refuse", async () => {
    const raw = JSON.stringify({
      model: 'm',
      max_tokens: 1,
      messages: [
        { role: 'user', content: 'x' },
        { role: 'robot', content: 'y' }
      ]
    })
    const res = await fetch(`${url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY }, body: raw })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/messages\.1\.role/)
    expect(fake.requests.map((r) => r.raw)).toEqual([raw])
  })

  describe("today's Claude Code requests (recorded bodies), with their mid-conversation system messages", () => {
    const recorded = (name: string): Record<string, unknown> & { messages: Message[] } =>
      JSON.parse(readFileSync(join(ROOT, 'test/fixtures/claude-code', name), 'utf8'))
    const send = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url}/v1/messages?beta=true`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'anthropic-version': '2023-06-01', ...headers },
        body: JSON.stringify(body)
      })

    it('forwards them under the budget as sent, their context editing performed (the upstream has none, and refuses what the API refuses)', async () => {
      fake.fallback = { text: 'ok' }
      for (const name of ['2.1.332-first.json', '2.1.332-mid-system.json']) {
        const body = recorded(name)
        expect(body.messages.some((m) => m.role === 'system')).toBe(true)
        // Claude Code asks to keep every thinking block: nothing to clear, and the field is not sent to an upstream without it
        expect(body.context_management).toEqual({ edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] })
        const raw = JSON.stringify(body)
        const res = await fetch(`${url}/v1/messages?beta=true`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY },
          body: raw
        })
        expect(res.status, name).toBe(200)
        expect(res.headers.get('x-compaction')).toBe('none')
        const { context_management: _performed, ...rest } = body
        expect(JSON.parse(fake.requests.at(-1)!.raw)).toEqual(rest)
        // the messages go as their bytes came: the prompt cache's prefix is the client's
        expect(fake.requests.at(-1)!.raw).toContain(JSON.stringify(body.messages))
        const count = await fetch(`${url}/v1/messages/count_tokens?beta=true`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY },
          body: raw
        })
        expect(count.status, name).toBe(200)
      }
      expect(fake.refused).toEqual([])
    })

    it('compacts them past the budget into a history the upstream takes, the system message and the setup context carried verbatim', async () => {
      const body = recorded('2.1.332-mid-system.json')
      const first = body.messages[0]!
      const work: Message[] = [first, ...body.messages.slice(1, 2)]
      for (let i = 0; i < 30; i++) work.push(...shellStep(`toolu_cc_${i}`, `cat src/part_${i}.ts`, `part ${i}: ${'z'.repeat(3_000)}`))
      work.push(assistant('Read them all.'), user('Now summarize what you found'))
      fake.fallback = (r) => (isSummaryCall(r) ? { toolInput: { objective: 'Run the scripted steps' } } : { text: 'ok' })
      const res = await send({ ...body, stream: false, messages: work }, { 'x-compaction-budget': '30000' })
      expect(res.status).toBe(200)
      expect(res.headers.get('x-compaction')).toBe('compacted')
      const forwarded = proxied(fake).at(-1)!
      expect(fake.refused).toEqual([])
      const messages = forwarded.body.messages as Message[]
      expect(messages.length).toBeLessThan(work.length)
      const system = messages.filter((m) => m.role === 'system')
      expect(system).toHaveLength(1)
      expect(system[0]!.content).toEqual(typeof work[1]!.content === 'string' ? [{ type: 'text', text: work[1]!.content }] : work[1]!.content)
      const reminders = (first.content as { type: string; text?: string }[]).filter((b) => b.text?.startsWith('<system-reminder>'))
      expect(reminders.length).toBeGreaterThan(0)
      for (const b of reminders) expect(messages[0]!.content).toContainEqual(b)
      // the setup context is no request of the user's
      const summary = String((messages[0]!.content as { text?: unknown }[])[0]?.text)
      expect(summary).not.toContain('<system-reminder>')
      expect(summary).toContain('Run the scripted steps.')
      expect(forwarded.body.system).toEqual(body.system)
      // the client's tools as sent, the gateway's recall tool after them
      expect(forwarded.body.tools).toEqual([...(body.tools as unknown[]), RECALL_TOOL_DEFINITION])
    })
  })
})

describe('the proxy as configured', () => {
  let fake: FakeAnthropic
  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'ok' }
  })
  afterAll(async () => fake.close())

  const post = (app: App, headers: Record<string, string>) =>
    app.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
    })

  it('without keys of its own and no Anthropic key, passes the client its own credentials (a local pass-through)', async () => {
    const app = await testApp({ ANTHROPIC_BASE_URL: fake.url })
    try {
      fake.requests.length = 0
      expect((await post(app, { 'x-api-key': 'sk-ant-clients-own-key' })).statusCode).toBe(200)
      expect(fake.requests[0]?.headers['x-api-key']).toBe('sk-ant-clients-own-key')
    } finally {
      await app.close()
    }
  })

  it('with gateway keys but no Anthropic key, says what is missing and calls nothing', async () => {
    const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, COMPACT_API_KEYS: 'k=gw-key-x-000000000' })
    try {
      fake.requests.length = 0
      const res = await post(app, { 'x-api-key': 'gw-key-x-000000000' })
      expect(res.statusCode).toBe(500)
      expect(res.json()).toEqual({
        type: 'error',
        error: { type: 'api_error', message: 'the gateway has no key for the Messages API: set ANTHROPIC_API_KEY on the gateway' }
      })
      expect(fake.requests).toHaveLength(0)
      // a setting to fix: the SDKs are told not to retry it (they retry a 500 by default)
      expect(res.headers['x-should-retry']).toBe('false')
      const address = await app.listen({ port: 0, host: '127.0.0.1' })
      let calls = 0
      const client = new Anthropic({
        apiKey: 'gw-key-x-000000000',
        baseURL: address,
        maxRetries: 2,
        fetch: (input, init) => ((calls += 1), fetch(input, init))
      })
      await expect(client.messages.create({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 500 })
      expect(calls).toBe(1)
    } finally {
      await app.close()
    }
  })

  it("applies the gateway's rate limit to proxied requests", async () => {
    const app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-upstream-x',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: 'k=gw-key-y-000000000',
      COMPACT_RATE_LIMIT_PER_MIN: '2'
    })
    try {
      const statuses = []
      for (let i = 0; i < 3; i++) statuses.push((await post(app, { 'x-api-key': 'gw-key-y-000000000' })).statusCode)
      expect(statuses).toEqual([200, 200, 429])
    } finally {
      await app.close()
    }
  })

  it('answers 502 in the Messages error shape when the upstream cannot be reached', async () => {
    const app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-upstream-x', ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' })
    try {
      const res = await post(app, {})
      expect(res.statusCode).toBe(502)
      expect(res.json()).toMatchObject({ type: 'error', error: { type: 'api_error' } })
      expect(res.json().error.message).toMatch(/could not be reached/)
    } finally {
      await app.close()
    }
  })
})

describe('one estimate for both routes', () => {
  let fake: FakeAnthropic
  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'ok' }
  })
  afterAll(async () => fake.close())

  it('takes the same history for the same size: at the budget both leave it, one token under it both compact', async () => {
    const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, COMPACT_PRECOMPUTE_AT: 'off' })
    try {
      // 600 messages of lengths that leave a remainder, so that where the rounding happens matters
      const messages = Array.from({ length: 600 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `${'word '.repeat(3 + (i % 7))}${i}` }))
      const size = (await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages, budget_tokens: 'off' } })).json().stats
        .raw_history_tokens as number
      expect(size).toBeGreaterThan(1_000)
      for (const [budget, compacts] of [
        [size, false],
        [size - 1, true]
      ] as const) {
        const compact = (await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages, budget_tokens: budget } })).json()
        expect(compact.compacted, `/v1/compact at ${budget}`).toBe(compacts)
        const proxied = await app.inject({
          method: 'POST',
          url: '/v1/messages',
          headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-clients-own-key', 'x-compaction-budget': String(budget) },
          payload: JSON.stringify({ model: 'm', max_tokens: 1, messages })
        })
        expect(proxied.statusCode).toBe(200)
        expect(proxied.headers['x-compaction'], `the proxy at ${budget}`).toBe(compacts ? 'compacted' : 'none')
      }
    } finally {
      await app.close()
    }
  })
})

describe('an answer larger than the client reads at once', () => {
  const TOTAL = 24 * 1024 * 1024

  /**
   * An upstream that streams 24 MiB of events as fast as its socket takes them, noting since when a write
   * has waited for its socket to drain: with the client not reading, the gateway must stop reading too, or
   * it would take in (and hold) the whole answer.
   */
  function floodingUpstream(): { server: import('node:http').Server; waitingSince: () => number | undefined; sent: () => number; eventBytes: number } {
    let waitingSince: number | undefined
    let sent = 0
    const event = Buffer.from(
      `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x'.repeat(8_000) } })}\n\n`
    )
    const server = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        const more = (): void => {
          waitingSince = undefined
          while (sent < TOTAL) {
            sent += event.length
            if (!res.write(event)) {
              waitingSince = Date.now()
              res.once('drain', more)
              return
            }
          }
          res.end()
        }
        more()
      })
    })
    return { server, waitingSince: () => waitingSince, sent: () => sent, eventBytes: event.length }
  }

  it('holds the upstream while the client does not read, and gives every byte in order once it does', async () => {
    const upstream = floodingUpstream()
    await new Promise<void>((resolve) => upstream.server.listen(0, '127.0.0.1', resolve))
    const app = await testApp({ ANTHROPIC_API_KEY: UPSTREAM_KEY, ANTHROPIC_BASE_URL: `http://127.0.0.1:${(upstream.server.address() as AddressInfo).port}` })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const port = (app.server.address() as AddressInfo).port
      const body = JSON.stringify({ model: 'm', max_tokens: 1, stream: true, messages: [{ role: 'user', content: 'hi' }] })
      const received = await new Promise<{ bytes: number; events: number; sentUnread: number }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/v1/messages', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
          res.pause()
          // not read until the upstream has all gone by, or its writes have stalled (no drain for half a second)
          const check = setInterval(() => {
            const since = upstream.waitingSince()
            if (upstream.sent() < TOTAL && (since === undefined || Date.now() - since < 500)) return
            clearInterval(check)
            const sentUnread = upstream.sent()
            let bytes = 0
            let tail = ''
            let events = 0
            res.on('data', (chunk: Buffer) => {
              bytes += chunk.length
              const text = tail + chunk.toString('latin1')
              events += text.split('\n\n').length - 1
              tail = text.slice(text.lastIndexOf('\n\n') + 2)
            })
            res.on('end', () => resolve({ bytes, events, sentUnread }))
            res.resume()
          }, 10)
        })
        req.on('error', reject)
        req.end(body)
      })
      // what the sockets' buffers hold, not the answer: the upstream waited for the client
      expect(received.sentUnread).toBeLessThan(TOTAL / 2)
      expect(received.bytes).toBe(upstream.sent())
      expect(received.events).toBe(upstream.sent() / upstream.eventBytes)
    } finally {
      await app.close()
      await new Promise((resolve) => upstream.server.close(resolve))
    }
  }, 30_000)
})

describe('a JSON answer the upstream breaks off', () => {
  /** An upstream that announces a JSON answer of 1,000 bytes, sends 40 of them, and drops the connection. */
  function breakingUpstream(): import('node:http').Server {
    return createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
        res.write('{"id":"msg_cut","type":"message","conten', () => setTimeout(() => res.socket?.destroy(), 20))
      })
    })
  }

  it('closes the connection of a JSON answer cut short, says why in its log, and answers the next request', async () => {
    const upstream = breakingUpstream()
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'Whole this time.' }
    const { stream: logs, lines } = capturedLog()
    const base = (port: number): string => `http://127.0.0.1:${port}`
    const app = await buildApp({
      config: loadConfig({ COMPACT_DB: ':memory:', ANTHROPIC_API_KEY: UPSTREAM_KEY, ANTHROPIC_BASE_URL: base((upstream.address() as AddressInfo).port) }),
      logStream: logs
    })
    const body = JSON.stringify({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const url = base((app.server.address() as AddressInfo).port)
      const cut = await fetch(`${url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      expect(cut.status).toBe(200)
      // the client sees the answer end early, as it would straight from the upstream: never a shorter JSON that parses
      await expect(cut.text()).rejects.toThrow()
      await new Promise((r) => setImmediate(r))
      expect(lines.find((l) => l.level === 40 && /broke off its answer/.test(String(l.msg)))).toBeDefined()
      // the gateway goes on: a whole answer from a working upstream, through the same app
      const other = await buildApp({
        config: loadConfig({ COMPACT_DB: ':memory:', ANTHROPIC_API_KEY: UPSTREAM_KEY, ANTHROPIC_BASE_URL: fake.url }),
        logger: false
      })
      try {
        const whole = await other.inject({ method: 'POST', url: '/v1/messages', headers: { 'content-type': 'application/json' }, payload: body })
        expect(whole.statusCode).toBe(200)
        expect(whole.json()).toMatchObject({ content: [{ type: 'text', text: 'Whole this time.' }] })
      } finally {
        await other.close()
      }
      const again = await fetch(`${url}/healthz`)
      expect(again.status).toBe(200)
    } finally {
      await app.close()
      await fake.close()
      await new Promise((resolve) => upstream.close(resolve))
    }
  })
})

describe("the prompt cache around a proxied compaction, from the upstream's own usage", () => {
  it('is kept per compaction and summed in the overview: what the crossing read, wrote and left unread, and what the requests after it read', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'ok' }
    const app = await testApp({
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_SUMMARIZER: 'extractive',
      COMPACT_BUDGET: '12000',
      COMPACT_PRECOMPUTE_AT: 'off'
    })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const sdk = new Anthropic({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
      const mark = { type: 'ephemeral' as const }
      const system = [{ type: 'text' as const, text: 'You are a coding agent. '.repeat(60), cache_control: mark }]
      // the newest message marked for the cache, as Claude Code marks it
      const marked = (messages: Message[]): Anthropic.MessageParam[] =>
        messages.map((m, i) =>
          i === messages.length - 1 && typeof m.content === 'string' ? { role: m.role, content: [{ type: 'text', text: m.content, cache_control: mark }] } : m
        ) as Anthropic.MessageParam[]
      const send = async (messages: Message[]) =>
        (
          await sdk.messages
            .create({ model: 'claude-any', max_tokens: 16, system, messages: marked(messages) }, { headers: { 'x-compaction-session': 'cache-1' } })
            .withResponse()
        ).response.headers
      // the conversation grows under the budget, then past it, then goes on from the compaction
      let history = session(6, 1_500)
      expect((await send(history)).get('x-compaction')).toBe('none')
      history = [
        ...history,
        ...Array.from({ length: 16 }, (_, i) => shellStep(`toolu_b_${i}`, `cat src/more_${i}.ts`, `more ${i}: ${'y'.repeat(3_000)}`)).flat(),
        assistant('Read the rest.'),
        user('Now the changelog')
      ]
      const crossed = await send(history)
      expect(crossed.get('x-compaction')).toBe('compacted')
      const summaryId = crossed.get('x-compaction-summary-id') as string
      await send([...history, assistant('Updated.'), user('And the changelog')])
      expect(fake.refused).toEqual([])
      const [before, crossing, after] = proxied(fake).map((r) => r.cache!)
      const detail = async () =>
        (await app.inject({ url: `/v1/sessions/cache-1/compactions/${summaryId}` })).json<{ cache: Record<string, number> | null }>().cache
      await until('the three answers are counted', async () => (await detail())?.after_requests === 1)
      const expected = {
        crossings: 1,
        crossing_read: crossing!.read,
        crossing_written: crossing!.written,
        invalidated: before!.read + before!.written - crossing!.read,
        after_requests: 1,
        after_read: after!.read,
        after_written: after!.written
      }
      expect(await detail()).toEqual(expected)
      // the rewrite invalidated what the cache held of the conversation; the request after it read the new prefix back
      expect(expected.invalidated).toBeGreaterThan(0)
      expect(expected.after_read).toBeGreaterThan(crossing!.read)
      expect((await app.inject({ url: '/v1/overview' })).json().compaction_cache).toEqual(expected)
    } finally {
      await app.close()
      await fake.close()
    }
  })
})
