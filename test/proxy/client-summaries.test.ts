import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import { type Message, promptTokens } from '../../src/compaction/index.js'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'

const CLIENT_KEY = 'sk-ant-client-own-key-proxy-0000000'
const BUDGET = 12_000
const mark = { type: 'ephemeral' as const }
const SYSTEM = [{ type: 'text' as const, text: 'You are a coding agent working in a repository. '.repeat(40), cache_control: mark }]
const TOOLS = [{ name: 'bash', description: 'Run a shell command', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } } } }]

/** A summary call of the gateway's in the client's conversation: its last block asks for the compaction. */
const isSummaryCall = (r: ReceivedRequest): boolean => JSON.stringify(r.body.messages?.at(-1) ?? '').includes('<compaction-request>')

/** The session after `steps` steps, its newest message marked for the cache as Claude Code marks it. */
function grow(steps: number): Message[] {
  const messages: Message[] = [user('Port the storage layer in src/storage to the new driver')]
  for (let i = 0; i < steps; i++)
    messages.push(
      ...shellStep(`toolu_s_${i}`, `sed -n 1,80p src/storage/part_${i}.ts`, `part ${i}: ${'w'.repeat(1_400)}`),
      assistant(`Read part ${i}.`),
      user(`Go on with part ${i + 1}`)
    )
  const last = messages[messages.length - 1]!
  messages[messages.length - 1] = { ...last, content: [{ type: 'text', text: String(last.content), cache_control: mark }] }
  return messages
}

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(env: Record<string, string>): Promise<{ app: App; fake: FakeAnthropic; sdk: Anthropic }> {
  const fake = await new FakeAnthropic().start()
  opened.push(fake)
  fake.fallback = (r) =>
    isSummaryCall(r)
      ? { text: JSON.stringify({ objective: 'Port the storage layer to the new driver (by the client model)', next_steps: ['Go on with the next part'] }) }
      : { text: 'ok' }
  const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, COMPACT_PRECOMPUTE_AT: '0.5', ...env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const sdk = new Anthropic({ apiKey: CLIENT_KEY, baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  return { app, fake, sdk }
}

/** Sends the session turn by turn until a request is compacted; each turn's background work settles first. */
async function untilCrossing(app: App, sdk: Anthropic): Promise<{ compacted: string | null; steps: number }> {
  for (let steps = 1; steps < 60; steps++) {
    const messages = grow(steps)
    const { response } = await sdk.messages
      .create(
        {
          model: 'claude-client-model',
          max_tokens: 64,
          system: SYSTEM,
          tools: TOOLS,
          messages: messages as Anthropic.MessageParam[],
          metadata: { user_id: 'client-summaries-1' }
        },
        { headers: { 'x-compaction-budget': String(BUDGET), 'x-claude-code-session-id': 'client-summaries-1' } }
      )
      .withResponse()
    await app.proxy.compactor.idle()
    if (response.headers.get('x-compaction') === 'compacted' && promptTokens(messages, SYSTEM, TOOLS) > BUDGET)
      return { compacted: response.headers.get('x-compaction-summary-id'), steps }
  }
  throw new Error('never crossed')
}

describe("summaries by the conversation's own model, in the conversation (COMPACT_PROXY_SUMMARIES)", () => {
  it("are written ahead in the client's conversation with its credentials, read its prefix from the cache, and are taken at the crossing", async () => {
    const { app, fake, sdk } = await gateway({})
    const { compacted } = await untilCrossing(app, sdk)
    expect(compacted).toBeTruthy()
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    const [call] = calls
    // the client's own credentials and model, its system prompt and tools as it sent them
    expect(call!.headers.authorization ?? call!.headers['x-api-key']).toContain(CLIENT_KEY)
    expect(call!.body.model).toBe('claude-client-model')
    expect(call!.body.system).toEqual(SYSTEM)
    expect(call!.body.tools).toEqual(TOOLS)
    expect(JSON.stringify(call!.body.messages.at(-1))).toContain(JSON.stringify(DOCTRINE_TEXT).slice(1, 200))
    // made after the client's own request of the same history was answered: that prefix is read from the cache
    expect(call!.cache!.read / call!.cache!.tokens).toBeGreaterThan(0.8)
    // taken at the crossing: the forwarded history opens with the client model's summary
    const crossing = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    expect(JSON.stringify(crossing.body.messages[0])).toContain('by the client model')
    const sources = await app.metrics.registry.getSingleMetricAsString('compaction_proxy_compactions_total')
    expect(sources).toMatch(/source="precomputed"} 1/)
    expect(fake.refused).toEqual([])
  })

  it("are counted in the session's cost with the upstream's own usage of every answer, and go with the session", async () => {
    const { app, fake, sdk } = await gateway({})
    await untilCrossing(app, sdk)
    const cost = await app.inject({ method: 'GET', url: '/v1/sessions/client-summaries-1/cost' })
    expect(cost.statusCode).toBe(200)
    const body = cost.json<{
      requests: number
      upstream: Record<string, number>
      tokens_kept_out: number
      summary_calls: number
      estimate: { billed_units: number; uncompacted_units: number }
    }>()
    // the upstream's own account of the answers it gave the client (not the summary calls): the fake bills from its cache
    const answers = fake.requests.filter((r) => !isSummaryCall(r))
    const sum = (f: (c: NonNullable<ReceivedRequest['cache']>) => number): number => answers.reduce((n, r) => n + f(r.cache!), 0)
    expect(body.requests).toBe(answers.length)
    expect(body.upstream).toMatchObject({
      cache_read_input_tokens: sum((c) => c.read),
      cache_creation_input_tokens: sum((c) => c.written),
      input_tokens: sum((c) => c.tokens - c.read - c.written)
    })
    expect(body.summary_calls).toBe(1)
    expect(body.tokens_kept_out).toBeGreaterThan(0)
    expect(body.estimate.uncompacted_units).toBeGreaterThan(0)
    const deleted = await app.inject({ method: 'DELETE', url: '/v1/sessions/client-summaries-1' })
    expect(deleted.statusCode).toBe(200)
    const after = await app.inject({ method: 'GET', url: '/v1/sessions/client-summaries-1/cost' })
    expect(after.json<{ requests: number }>().requests).toBe(0)
  })

  it("show in the key's overview: the crossing, its wait, the client model's summary, and what was saved at the prices configured", async () => {
    const { app, fake, sdk } = await gateway({
      COMPACT_PRICE_INPUT: '2',
      COMPACT_PRICE_OUTPUT: '10',
      COMPACT_PRICE_CACHE_WRITE: '2.5',
      COMPACT_PRICE_CACHE_READ: '0.2',
      COMPACT_PRICE_CURRENCY: 'EUR'
    })
    await untilCrossing(app, sdk)
    const res = await app.inject({ method: 'GET', url: '/v1/overview' })
    expect(res.statusCode).toBe(200)
    const o = res.json()
    expect(o.compactions).toMatchObject({ total: 1, via_proxy: 1, via_compact_route: 0 })
    expect(o.compactions.tokens_removed).toBeGreaterThan(0)
    expect(o.summaries).toMatchObject({ model: 1, fallback: 0, models: { 'claude-client-model': 1 } })
    expect(o.crossings.count).toBe(1)
    expect(o.crossings.waits.reduce((n: number, w: { count: number }) => n + w.count, 0)).toBe(1)
    const answers = fake.requests.filter((r) => !isSummaryCall(r))
    expect(o.requests).toMatchObject({ count: answers.length, metered: answers.length })
    expect(o.requests.tokens_kept_out).toBeGreaterThan(0)
    // billed: what the fake says each answer and the summary call cost, at the prices set (per million tokens)
    const summary = fake.requests.filter(isSummaryCall)
    const sum = (rs: ReceivedRequest[], f: (c: NonNullable<ReceivedRequest['cache']>) => number): number => rs.reduce((n, r) => n + f(r.cache!), 0)
    const answered =
      2 * sum(answers, (c) => c.tokens - c.read - c.written) +
      2.5 * sum(answers, (c) => c.written) +
      0.2 * sum(answers, (c) => c.read) +
      10 * o.requests.upstream.output_tokens
    expect(o.requests.upstream.cache_read_input_tokens).toBe(sum(answers, (c) => c.read))
    const summaryIn = sum(summary, (c) => c.tokens)
    expect(o.summary_calls).toMatchObject({ calls: 1, input_tokens: summaryIn })
    expect(o.savings.prices).toEqual({ currency: 'EUR', input: 2, output: 10, cache_write: 2.5, cache_read: 0.2 })
    expect(o.savings.billed).toBeCloseTo((answered + 2 * summaryIn + 10 * o.summary_calls.output_tokens) / 1e6, 3)
    // one session's overview holds the same crossing; another session's, none
    const one = (await app.inject({ method: 'GET', url: '/v1/overview?session_id=client-summaries-1' })).json()
    expect(one.crossings.count).toBe(1)
    expect((await app.inject({ method: 'GET', url: '/v1/overview?session_id=another' })).json().compactions.total).toBe(0)
  })

  it('are not made with COMPACT_SUMMARIZER=extractive: the crossing merges from the ledger', async () => {
    const { app, fake, sdk } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    await untilCrossing(app, sdk)
    expect(fake.requests.filter(isSummaryCall)).toEqual([])
    const crossing = fake.requests.at(-1)!
    expect(JSON.stringify(crossing.body.messages[0])).not.toContain('by the client model')
  })

  it("are written in the conversation with the gateway's own key where it forwards with one, read from the cache it wrote", async () => {
    const GATEWAY_KEY = 'sk-ant-gateway-own-key-000000000000'
    const { app, fake, sdk } = await gateway({ ANTHROPIC_API_KEY: GATEWAY_KEY })
    const { compacted } = await untilCrossing(app, sdk)
    expect(compacted).toBeTruthy()
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    const [call] = calls
    // the key the conversation is forwarded with (the gateway's), the conversation's model: the same cache
    expect(call!.headers['x-api-key']).toBe(GATEWAY_KEY)
    expect(JSON.stringify(call!.headers)).not.toContain(CLIENT_KEY)
    expect(call!.body.model).toBe('claude-client-model')
    expect(call!.cache!.read / call!.cache!.tokens).toBeGreaterThan(0.8)
    // the gateway's own summarizer (a transcript, uncached) was not called
    expect(fake.requests.some((r) => (r.body.tools ?? []).some((t) => t.name === 'record_summary'))).toBe(false)
    const crossing = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    expect(JSON.stringify(crossing.body.messages[0])).toContain('by the client model')
    expect(fake.refused).toEqual([])
  })

  it("are written by the gateway's own model (COMPACT_MODEL) with COMPACT_PROXY_SUMMARIES=gateway, or where COMPACT_SUMMARIZER names one", async () => {
    for (const env of [{ COMPACT_PROXY_SUMMARIES: 'gateway' }, { COMPACT_SUMMARIZER: 'anthropic' }] as Record<string, string>[]) {
      const { app, fake, sdk } = await gateway({ ANTHROPIC_API_KEY: 'sk-ant-gateway-own-key-000000000000', ...env })
      await untilCrossing(app, sdk)
      expect(fake.requests.filter(isSummaryCall), JSON.stringify(env)).toEqual([])
      expect(fake.requests.some((r) => (r.body.tools ?? []).some((t) => t.name === 'record_summary'))).toBe(true)
    }
  })
})
