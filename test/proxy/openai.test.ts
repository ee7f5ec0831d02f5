import type { AddressInfo } from 'node:net'
import fc from 'fast-check'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { IMAGE_TOKENS, emptySections, promptTokens } from '../../src/compaction/index.js'
import { ProxyCompactor } from '../../src/service/proxy/compactor.js'
import { type OpenAiApi, openAiPayload, readOpenAiRequest } from '../../src/proxy/openai.js'
import type { App } from '../../src/server/app.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import type { Summarizer } from '../../src/summarizer/summarizer.js'
import { until } from '../helpers/wait.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { FakeOpenAi, type OpenAiRequest, chatCompletionsRefusal, responsesRefusal } from '../helpers/fake-openai.js'

const UPSTREAM_KEY = 'sk-openai-upstream-proxy-test-000000'
const GATEWAY_KEY = 'gw-openai-proxy-test-key-1'
const BUDGET = '6000'

type Item = Record<string, unknown>

/** A Chat Completions coding session: system prompt, task, `steps` tool calls with outputs of `chars` characters. */
function chatSession(steps: number, chars = 2_000, tag = 'a'): Item[] {
  const items: Item[] = [
    { role: 'system', content: 'You are a coding agent. Use the tools.' },
    { role: 'user', content: `Fix the failing parser test in src/parse_${tag}.ts` }
  ]
  for (let i = 0; i < steps; i++) {
    items.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: `call_${tag}_${i}`, type: 'function', function: { name: 'shell', arguments: JSON.stringify({ cmd: `cat src/module_${i}.ts` }) } }]
    })
    items.push({ role: 'tool', tool_call_id: `call_${tag}_${i}`, content: `line ${i}: ${'x'.repeat(chars)}` })
  }
  items.push({ role: 'assistant', content: `Read ${steps} modules.` }, { role: 'user', content: 'Now update docs/parser.md to match' })
  return items
}

/**
 * A Responses history as Codex sends it: its tools as an `additional_tools` developer item, its instructions
 * as developer messages, the environment and the prompt as user messages, then reasoning (encrypted),
 * custom tool calls with outputs as lists of parts, function calls, and an item type no API has yet.
 */
function codexSession(steps: number, chars = 2_000): Item[] {
  const items: Item[] = [
    { type: 'additional_tools', id: 'at_1', role: 'developer', tools: [{ type: 'custom', name: 'exec', description: 'Run JavaScript. '.repeat(40) }] },
    { type: 'message', id: 'msg_dev', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex. '.repeat(60) }] },
    {
      type: 'message',
      id: 'msg_env',
      role: 'user',
      content: [{ type: 'input_text', text: '<environment_context>\n  <cwd>/work</cwd>\n</environment_context>' }]
    },
    { type: 'message', id: 'msg_task', role: 'user', content: [{ type: 'input_text', text: 'Make the build pass: fix src/lexer.rs' }] }
  ]
  for (let i = 0; i < steps; i++) {
    items.push({ type: 'reasoning', id: `rs_${i}`, summary: [], encrypted_content: `gAAAA${'e'.repeat(200)}${i}` })
    if (i % 3 === 2) {
      items.push({ type: 'function_call', id: `fc_${i}`, call_id: `call_${i}`, name: 'wait', arguments: JSON.stringify({ cell_id: String(i) }) })
      items.push({ type: 'function_call_output', call_id: `call_${i}`, output: `cell ${i}: ${'y'.repeat(chars)}` })
    } else {
      items.push({
        type: 'custom_tool_call',
        id: `ctc_${i}`,
        status: 'completed',
        call_id: `call_${i}`,
        name: 'exec',
        input: `const r = await tools.exec_command({cmd: "cargo build -p step${i}"}); text(r)`
      })
      items.push({
        type: 'custom_tool_call_output',
        id: `ctco_${i}`,
        call_id: `call_${i}`,
        output: [
          { type: 'input_text', text: 'Script completed\n' },
          { type: 'input_text', text: `step ${i}: ${'x'.repeat(chars)}` }
        ]
      })
    }
    if (i === 4) items.push({ type: 'future_item_kind', id: 'fut_1', payload: { note: 'an item type the gateway does not know' } })
  }
  items.push({ type: 'message', role: 'assistant', id: 'msg_a', content: [{ type: 'output_text', text: `Ran ${steps} steps.`, annotations: [] }] })
  items.push({ type: 'message', id: 'msg_next', role: 'user', content: [{ type: 'input_text', text: 'Now run the tests' }] })
  return items
}

const isSummaryCall = (r: OpenAiRequest): boolean => (r.body.tools ?? []).some((t) => t.function?.name === 'record_summary')
const proxied = (fake: FakeOpenAi): OpenAiRequest[] => fake.requests.filter((r) => !isSummaryCall(r))

/** The text of every part of an item list, for what a summary item says. */
const itemText = (item: Item | undefined): string => JSON.stringify(item?.content ?? '')

describe('POST /v1/chat/completions and /v1/responses: drop-in proxies for OpenAI-format agents', () => {
  let fake: FakeOpenAi
  let app: App
  let url: string
  let sdk: OpenAI

  beforeAll(async () => {
    fake = await new FakeOpenAi().start()
    app = await testApp({
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${fake.url}/v1`,
      COMPACT_SUMMARIZER: 'extractive',
      COMPACT_API_KEYS: `alice=${GATEWAY_KEY}`,
      COMPACT_PRECOMPUTE_AT: 'off',
      // the fake has OpenAI's own compaction (/v1/responses/compact): it is forwarded to, as to OpenAI
      COMPACT_CONTEXT_MANAGEMENT: 'forward'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    sdk = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await app.close()
    await fake.close()
  })
  afterEach(() => {
    fake.requests.length = 0
    fake.refused.length = 0
    fake.fallback = { text: 'Hello from the upstream.' }
  })

  it('Chat Completions through the real SDK: the upstream answer, sent with the gateway key, never the client key', async () => {
    fake.fallback = { text: 'Hello from the upstream.' }
    const { data, response } = await sdk.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }).withResponse()
    expect(data.choices[0]?.message.content).toBe('Hello from the upstream.')
    expect(response.headers.get('x-compaction')).toBe('none')
    const [sent] = fake.requests
    expect(sent?.path).toBe('/v1/chat/completions')
    expect(sent?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`)
    expect(JSON.stringify(sent?.headers)).not.toContain(GATEWAY_KEY)
  })

  it('Chat Completions streamed through the SDK: every chunk, in order', async () => {
    fake.fallback = { text: 'Streamed, in two pieces.' }
    const stream = await sdk.chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'stream please' }] })
    const pieces: string[] = []
    for await (const chunk of stream) pieces.push(chunk.choices[0]?.delta.content ?? '')
    expect(pieces.join('')).toBe('Streamed, in two pieces.')
    expect(pieces.filter((p) => p !== '').length).toBe(2)
  })

  it('the Responses API through the SDK, plain and streamed (the stream helper assembles the final response)', async () => {
    fake.fallback = { text: 'A response.' }
    const plain = await sdk.responses.create({ model: 'gpt-test', input: [{ role: 'user', content: 'hi' }] })
    expect(plain.output_text).toBe('A response.')
    const stream = sdk.responses.stream({ model: 'gpt-test', input: [{ role: 'user', content: 'hi again' }] })
    const deltas: string[] = []
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta))
    const final = await stream.finalResponse()
    expect(final.output_text).toBe('A response.')
    expect(deltas).toEqual(['A response.'])
    expect(fake.requests.map((r) => r.path)).toEqual(['/v1/responses', '/v1/responses'])
  })

  it("counts every answer's usage into the session's cost, Chat Completions' and the Responses API's, plain and streamed, cached input as cache reads", async () => {
    fake.fallback = { text: 'Counted.' }
    const session = { headers: { 'x-session-id': 'usage-openai-1' } }
    await sdk.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'one' }] }, session)
    const chunks = await sdk.chat.completions.create(
      { model: 'gpt-test', messages: [{ role: 'user', content: 'two' }], stream: true, stream_options: { include_usage: true } },
      session
    )
    for await (const _chunk of chunks) void _chunk
    await sdk.responses.create({ model: 'gpt-test', input: [{ role: 'user', content: 'three' }] }, session)
    await (await sdk.responses.stream({ model: 'gpt-test', input: [{ role: 'user', content: 'four' }] }, session)).finalResponse()
    // the upstream's own account of what it answered, as the fake billed it
    const prompt = fake.requests.reduce((n, r) => n + (r.cache?.prompt ?? 0), 0)
    const cached = fake.requests.reduce((n, r) => n + (r.cache?.cached ?? 0), 0)
    expect(fake.requests.every((r) => r.cache !== undefined)).toBe(true)
    await until('the four answers are counted', async () => {
      const cost = (await app.inject({ url: '/v1/sessions/usage-openai-1/cost', headers: { authorization: `Bearer ${GATEWAY_KEY}` } })).json<{
        requests: number
      }>()
      return cost.requests === 4
    })
    const cost = (await app.inject({ url: '/v1/sessions/usage-openai-1/cost', headers: { authorization: `Bearer ${GATEWAY_KEY}` } })).json<{
      upstream: Record<string, number>
    }>()
    // (the fake bills 100 output tokens for a chat answer, 10 for a streamed one and for each response)
    expect(cost.upstream).toEqual({ input_tokens: prompt - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: 130 })
  })

  it('forwards a body under the budget byte for byte: spacing, key order, huge numbers and unknown fields as sent', async () => {
    const raw = `{"model":"gpt-test",  "messages":[{"role":"user","content":"h\\u00e9llo"}],"seed":12345678901234567890123,"zz_future":{"a":[1,2.50]}}`
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${GATEWAY_KEY}` },
      body: raw
    })
    expect(res.status).toBe(200)
    expect(fake.requests[0]?.raw.toString('utf8')).toBe(raw)
  })

  it('compacts a Chat Completions history past the budget: system as sent, one summary message, the tail as sent, no call split', async () => {
    const messages = chatSession(30)
    const { response } = await sdk.chat.completions
      .create({ model: 'gpt-test', messages: messages as never }, { headers: { 'x-compaction-budget': BUDGET, 'x-session-id': 'chat-1' } })
      .withResponse()
    expect(response.headers.get('x-compaction')).toBe('compacted')
    expect(response.headers.get('x-compaction-summary-id')).toMatch(/./)
    expect(fake.refused).toEqual([])
    const sent = fake.requests[0]?.body.messages as unknown as Item[]
    expect(sent[0]).toEqual(messages[0])
    expect(sent[1]?.role).toBe('user')
    expect(itemText(sent[1])).toContain('Fix the failing parser test')
    // the rest are the client's own last messages, unchanged
    const tail = sent.slice(2)
    expect(tail.length).toBeGreaterThan(1)
    expect(tail).toEqual(messages.slice(messages.length - tail.length))
    expect(sent.length).toBeLessThan(messages.length)
    // the proxy's estimate of what it sent is under the budget
    const { points } = (await app.inject({ method: 'GET', url: '/v1/sessions/chat-1/timeline', headers: { 'x-api-key': GATEWAY_KEY } })).json<{
      points: { context_after_compaction: number; budget_tokens: number }[]
    }>()
    expect(points).toHaveLength(1)
    expect(points[0]?.budget_tokens).toBe(Number(BUDGET))
    expect(points[0]?.context_after_compaction).toBeLessThanOrEqual(Number(BUDGET))
  })

  it('a conversation that goes on sends the same summary message, byte for byte, and its new turns as sent (no new summary)', async () => {
    const first = chatSession(30, 2_000, 'b')
    await sdk.chat.completions.create({ model: 'gpt-test', messages: first as never }, { headers: { 'x-compaction-budget': BUDGET, 'x-session-id': 'chat-2' } })
    const next = [...first, { role: 'assistant', content: 'Updated the docs.' }, { role: 'user', content: 'Thanks, commit it' }]
    const { response } = await sdk.chat.completions
      .create({ model: 'gpt-test', messages: next as never }, { headers: { 'x-compaction-budget': BUDGET, 'x-session-id': 'chat-2' } })
      .withResponse()
    expect(response.headers.get('x-compaction')).toBe('compacted')
    const [a, b] = fake.requests.map((r) => r.body.messages as unknown as Item[])
    expect(JSON.stringify(b?.[1])).toBe(JSON.stringify(a?.[1]))
    expect(b?.slice(-2)).toEqual(next.slice(-2))
    const records = (await app.inject({ method: 'GET', url: '/v1/sessions/chat-2/compactions', headers: { 'x-api-key': GATEWAY_KEY } })).json<{
      compactions: unknown[]
    }>()
    expect(records.compactions).toHaveLength(1)
  })

  it('compacts a Codex-shaped Responses history: its tools and instructions as sent, reasoning kept with its turn, unknown items untouched', async () => {
    const input = codexSession(24)
    const stream = await sdk.responses.create(
      { model: 'gpt-test', stream: true, store: false, include: ['reasoning.encrypted_content'], input: input as never, prompt_cache_key: 'thread-7' },
      { headers: { 'x-compaction-budget': BUDGET, 'session-id': 'codex-1' } }
    )
    for await (const _event of stream) {
      // drained
    }
    expect(fake.refused).toEqual([])
    const sent = fake.requests[0]?.body.input as unknown as Item[]
    expect(sent.slice(0, 2)).toEqual(input.slice(0, 2)) // additional_tools and the developer message
    expect(sent[2]).toMatchObject({ type: 'message', role: 'user' })
    expect(itemText(sent[2])).toContain('Make the build pass')
    const tail = sent.slice(3)
    expect(tail).toEqual(input.slice(input.length - tail.length))
    expect(sent.length).toBeLessThan(input.length)
    // every reasoning item kept is followed by the item it belongs to, with its encrypted content as sent
    for (const [k, item] of tail.entries()) if (item.type === 'reasoning') expect(tail[k + 1]?.type).toMatch(/call$/)
    const records = (await app.inject({ method: 'GET', url: '/v1/sessions/codex-1/compactions', headers: { 'x-api-key': GATEWAY_KEY } })).json<{
      compactions: unknown[]
    }>()
    expect(records.compactions).toHaveLength(1)
  })

  it("the agent's own compaction (responses.compact through the SDK): under the budget as sent, past it the gateway's compacted input, the upstream's compaction as the answer", async () => {
    const small = codexSession(2, 200)
    const asSent = await sdk.responses.compact({ model: 'gpt-test', input: small as never }, { headers: { 'x-compaction-budget': BUDGET } })
    expect(fake.requests[0]?.path).toBe('/v1/responses/compact')
    expect(fake.requests[0]?.body.input).toEqual(small)
    expect(asSent.object).toBe('response.compaction')

    const large = codexSession(24)
    const { data, response } = await sdk.responses
      .compact({ model: 'gpt-test', input: large as never }, { headers: { 'x-compaction-budget': BUDGET, 'session-id': 'codex-compact-1' } })
      .withResponse()
    expect(fake.refused).toEqual([])
    expect(response.headers.get('x-compaction')).toBe('compacted')
    const sent = fake.requests[1]?.body.input as unknown as Item[]
    expect(sent.length).toBeLessThan(large.length)
    expect(sent.slice(0, 2)).toEqual(large.slice(0, 2))
    expect(itemText(sent[2])).toContain('Make the build pass')
    expect(sent.slice(3)).toEqual(large.slice(large.length - (sent.length - 3)))
    // the upstream's answer as it gave it: the user messages it was sent, then its compaction item
    expect(data.output.at(-1)).toMatchObject({ type: 'compaction' })
    expect(data.output.slice(0, -1)).toEqual(sent.filter((i) => i.type === 'message' && i.role === 'user'))
    const records = (await app.inject({ method: 'GET', url: '/v1/sessions/codex-compact-1/compactions', headers: { 'x-api-key': GATEWAY_KEY } })).json<{
      compactions: unknown[]
    }>()
    expect(records.compactions).toHaveLength(1)
  })

  it('forwards a Responses request that names previous_response_id unread, over the budget too, and says so', async () => {
    const input = codexSession(24).slice(3)
    const raw = JSON.stringify({ model: 'gpt-test', previous_response_id: 'resp_abc', input })
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${GATEWAY_KEY}`, 'x-compaction-budget': '1000' },
      body: raw
    })
    expect(res.status).toBe(200)
    expect(res.headers.get('x-compaction')).toBe('none')
    expect(res.headers.get('x-compaction-not-read')).toBe('previous_response_id')
    expect(fake.requests[0]?.raw.toString('utf8')).toBe(raw)
  })

  it('refuses an over-budget history it cannot read, naming the item; under the budget the upstream is the judge', async () => {
    const messages = chatSession(30)
    messages.splice(5, 0, { role: 'tool', tool_call_id: 'call_nobody', content: 'an output of no call' })
    const over = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${GATEWAY_KEY}`, 'x-compaction-budget': BUDGET },
      body: JSON.stringify({ model: 'gpt-test', messages })
    })
    expect(over.status).toBe(400)
    const { error } = (await over.json()) as { error: { message: string; path: string } }
    expect(error.path).toBe('/messages/5')
    expect(error.message).toContain('call_nobody')
    expect(fake.requests).toHaveLength(0)

    const small = [
      { role: 'user', content: 'hi' },
      { role: 'tool', tool_call_id: 'call_nobody', content: 'x' }
    ]
    const under = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${GATEWAY_KEY}` },
      body: JSON.stringify({ model: 'gpt-test', messages: small })
    })
    expect(under.status).toBe(400) // the upstream's own refusal
    expect(fake.refused[0]).toContain("messages with role 'tool' must be a response")
  })

  it('an item in the Responses input that is not an object is refused at its place when the request may be over the budget', async () => {
    const input: unknown[] = codexSession(24)
    input.splice(9, 0, 42)
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${GATEWAY_KEY}`, 'x-compaction-budget': BUDGET },
      body: JSON.stringify({ model: 'gpt-test', input })
    })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { path: string } }).error.path).toBe('/input/9')
  })

  it('a stream the upstream breaks off ends with an error event the SDK throws', async () => {
    fake.reply({ text: 'never finished', breakOff: true })
    const stream = await sdk.chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] })
    await expect(
      (async () => {
        for await (const _chunk of stream) {
          // read until it breaks
        }
      })()
    ).rejects.toThrow(/the OpenAI API stream broke off/)
  })

  it('an upstream refusal comes back with its status and body', async () => {
    await expect(sdk.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining('model')
    })
  })
})

describe('the OpenAI proxies without a key for the upstream', () => {
  it('answer 500 naming the setting, and tell the SDK not to retry', async () => {
    const app = await testApp({ COMPACT_API_KEYS: `alice=${GATEWAY_KEY}`, OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' })
    const res = await app.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: { authorization: `Bearer ${GATEWAY_KEY}` },
      payload: { model: 'm', input: 'hi' }
    })
    expect(res.statusCode).toBe(500)
    expect(res.headers['x-should-retry']).toBe('false')
    expect(res.json<{ error: { message: string } }>().error.message).toContain('OPENAI_API_KEY')
    await app.close()
  })
})

describe('a proxied compaction summarized by an OpenAI-compatible model', () => {
  it('the summary is written ahead by the openai summarizer through the same upstream, and the crossing sends it', async () => {
    const fake = await new FakeOpenAi().start()
    fake.fallback = (r) => (isSummaryCall(r) ? { toolInput: { objective: 'Fix the failing parser test (model summary)' } } : { text: 'ok' })
    const app = await testApp({
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${fake.url}/v1`,
      COMPACT_SUMMARIZER: 'openai',
      COMPACT_MODEL: 'gpt-small',
      COMPACT_PRECOMPUTE_AT: '0.5'
    })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`
      const client = new OpenAI({ apiKey: 'unused', baseURL: base, maxRetries: 0 })
      const send = (steps: number) =>
        client.chat.completions
          .create({ model: 'gpt-agent', messages: chatSession(steps) as never }, { headers: { 'x-compaction-budget': BUDGET } })
          .withResponse()
      // the session grows a step a request; the summary is written ahead once its growth says the crossing is near
      let steps = 1
      let crossing: Awaited<ReturnType<typeof send>>['response'] | undefined
      while (steps < 60) {
        const { response } = await send(steps++)
        if (response.headers.get('x-compaction') === 'compacted') {
          crossing = response
          break
        }
        if (fake.requests.some(isSummaryCall))
          await until('the summary written ahead', async () =>
            (await app.metrics.registry.getSingleMetricAsString('compaction_proxy_precomputes_total')).includes('event="done"} 1')
          )
      }
      expect(crossing).toBeDefined()
      expect(fake.requests.filter(isSummaryCall).map((r) => r.body.model)).toEqual(['gpt-small'])
      const sent = proxied(fake).at(-1)
      expect(itemText((sent?.body.messages as unknown as Item[])[1])).toContain('(model summary)')
    } finally {
      await app.close()
      await fake.close()
    }
  })
})

/** A model that answers at once: the proxy's background paths (summaries written ahead, rewrites) run too. */
const instantModel: Summarizer = {
  kind: 'openai',
  summarize: async () => ({
    sections: { ...emptySections(), objective: 'Make the build pass' },
    report: { kind: 'openai', model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 0 }
  })
}

/** Text of a given length with emoji (astral characters) and NULs where a clip may fall. */
const text = (n: number, seed: number): string => {
  const unit = `out ${seed} 😀\u0000 ${'é'.repeat(seed % 5)}𝄞 `
  // cut at a code point: the client's own text is well formed (a clip must keep it so)
  return Array.from(unit.repeat(Math.ceil(n / unit.length)))
    .slice(0, n)
    .join('')
}

/** One step of a generated session: its output's size, how many parallel calls, and whether reasoning or an unknown item comes with it. */
const stepArb = fc.record({
  size: fc.integer({ min: 0, max: 9_000 }),
  calls: fc.integer({ min: 1, max: 3 }),
  reasoning: fc.boolean(),
  unknown: fc.boolean(),
  prompt: fc.boolean()
})
type Step = { size: number; calls: number; reasoning: boolean; unknown: boolean; prompt: boolean }

/** The requests of a growing Chat Completions session: after each step the client asks with its history so far. */
function chatRequests(steps: Step[]): Item[][] {
  const items: Item[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the build' }
  ]
  const requests: Item[][] = []
  steps.forEach((s, k) => {
    const ids = Array.from({ length: s.calls }, (_, j) => `call_${k}_${j}`)
    items.push({
      role: 'assistant',
      content: s.reasoning ? `thinking about step ${k}` : null,
      tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'shell', arguments: JSON.stringify({ cmd: `make step${k}` }) } }))
    })
    for (const id of ids) items.push({ role: 'tool', tool_call_id: id, content: text(s.size, k) })
    if (s.prompt) items.push({ role: 'assistant', content: `step ${k} done` }, { role: 'user', content: [{ type: 'text', text: `go on ${k} 🚀` }] })
    requests.push(structuredClone(items))
  })
  return requests
}

/** The requests of a growing Responses session, shaped as Codex sends it. */
function responsesRequests(steps: Step[], images: boolean): Item[][] {
  const items: Item[] = codexSession(0).slice(0, 4)
  const requests: Item[][] = []
  steps.forEach((s, k) => {
    if (s.reasoning) items.push({ type: 'reasoning', id: `rs_${k}`, summary: [], encrypted_content: `enc${k}` })
    const ids = Array.from({ length: s.calls }, (_, j) => `call_${k}_${j}`)
    for (const id of ids) items.push({ type: 'custom_tool_call', call_id: id, name: 'exec', input: `text(${k})` })
    if (s.unknown) items.push({ type: 'future_item_kind', id: `fut_${k}` })
    // an output of parts, now and then with an image among them (where the budget holds an image's flat cost)
    const image = { type: 'input_image', image_url: `data:image/png;base64,${'iVBOR'.repeat(20)}` }
    for (const id of ids)
      items.push({
        type: 'custom_tool_call_output',
        call_id: id,
        output: [{ type: 'input_text', text: text(s.size, k) }, ...(s.unknown && images ? [image, { type: 'input_text', text: `after the image ${k}` }] : [])]
      })
    if (s.prompt) items.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: `go on ${k} 🚀` }] })
    requests.push(structuredClone(items))
  })
  return requests
}

describe('the OpenAI proxies over generated growing sessions (property)', () => {
  it('forward a request the API takes, the system items and the kept items as sent (but reported clips), within the budget whenever changed', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArb, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 2_000, max: 16_000 }),
        fc.constantFrom<OpenAiApi>('chat', 'responses'),
        fc.boolean(),
        async (steps, budget, api, withModel) => {
          let n = 0
          const proxy = new ProxyCompactor({
            deps: {
              defaults: { budgetTokens: 45_000, keepTurns: 8 },
              extractive: new ExtractiveSummarizer(),
              ...(withModel ? { modelSummarizer: instantModel } : {}),
              newId: () => `cmp_${++n}`,
              now: () => performance.now()
            },
            precomputeAt: withModel ? 0.5 : undefined,
            canPrecompute: () => true,
            onPrecompute: () => undefined
          })
          for (const items of api === 'chat' ? chatRequests(steps) : responsesRequests(steps, budget >= 8_000)) {
            const body = api === 'chat' ? { model: 'm', messages: items } : { model: 'm', store: false, input: items }
            const read = readOpenAiRequest(body, api, () => true)
            if (read.kind !== 'history') throw new Error(read.reason)
            const { history } = read
            const outcome = await proxy.prepare({
              messages: history.messages,
              system: history.system,
              tools: history.tools,
              keyName: 't',
              session: 's',
              budgetTokens: budget
            })
            if (outcome.kind === 'none') continue
            const raw = openAiPayload(body, history, outcome).toString('utf8')
            expect(api === 'chat' ? chatCompletionsRefusal(raw) : responsesRefusal(raw)).toBeUndefined()
            const sent = (JSON.parse(raw) as Record<string, Item[]>)[history.field] as Item[]
            const leading = history.adapted.leading
            expect(sent.slice(0, leading)).toEqual(items.slice(0, leading))
            const tail = sent.slice(leading + 1)
            const from = items.length - tail.length
            expect(from).toBe(history.adapted.starts[outcome.keptFrom])
            // the newest item the client cannot read (encrypted reasoning) is never summarized away
            const encrypted = items.filter((i) => typeof i.encrypted_content === 'string').at(-1)
            if (encrypted) expect(sent).toContainEqual(encrypted)
            // every kept item as sent, but those the bound clipped (each one reported)
            const clipped = new Set(outcome.clips.map((c) => history.adapted.sources[c.message_index]?.[c.block_index ?? 0]?.item))
            tail.forEach((item, k) => {
              const own = items[from + k]!
              if (!clipped.has(from + k)) expect(item).toEqual(own)
              // a clipped output keeps its shape: its parts, each non-text part as it came
              else if (Array.isArray(own.output)) {
                const parts = item.output as Item[]
                expect(parts.map((p) => p.type)).toEqual((own.output as Item[]).map((p) => p.type))
                parts.forEach((p, j) => {
                  if (p.type !== 'input_text') expect(p).toEqual((own.output as Item[])[j])
                })
              }
            })
            // within the budget, estimated as the proxy estimates any request it reads
            const again = readOpenAiRequest({ ...body, [history.field]: sent }, api, () => true)
            if (again.kind !== 'history') throw new Error(again.reason)
            const forwarded = promptTokens(again.history.messages, again.history.system, again.history.tools)
            if (forwarded > budget) {
              // only where what must be kept (the newest encrypted item and all after it) cannot fit: its images
              // alone fill the budget, and the history is left behind the summary that stood for its start
              const mustKeep = items.slice(items.lastIndexOf(encrypted!))
              const images = mustKeep.flatMap((i) => (Array.isArray(i.output) ? (i.output as Item[]) : [])).filter((p) => p.type === 'input_image').length
              expect(outcome.kind).toBe('reused')
              expect(images * IMAGE_TOKENS).toBeGreaterThan(budget / 2)
            }
          }
          await proxy.close()
        }
      ),
      {
        numRuns: 80,
        examples: [
          // once found: a clip the anchor repeated went into the next compaction's input unreported
          [
            [
              { size: 0, calls: 1, reasoning: true, unknown: false, prompt: false },
              { size: 3011, calls: 2, reasoning: false, unknown: false, prompt: false },
              { size: 0, calls: 1, reasoning: false, unknown: false, prompt: false }
            ],
            2000,
            'responses',
            false
          ],
          // once found: a summary written ahead taken at a crossing where nothing more could be compacted made the prompt larger
          [
            [
              { size: 0, calls: 2, reasoning: true, unknown: true, prompt: false },
              { size: 0, calls: 1, reasoning: false, unknown: true, prompt: false },
              { size: 0, calls: 2, reasoning: false, unknown: true, prompt: false },
              { size: 0, calls: 1, reasoning: false, unknown: false, prompt: false }
            ],
            8000,
            'responses',
            true
          ]
        ]
      }
    )
  }, 240_000)
})

describe('GET /v1/models: each SDK lists the models of the API it speaks, asked of its upstream with the gateway key', () => {
  it("the Anthropic SDK reaches ANTHROPIC_BASE_URL, the OpenAI SDK OPENAI_BASE_URL; an unknown model is the upstream's 404", async () => {
    const anthropicUp = await new FakeAnthropic().start()
    const openaiUp = await new FakeOpenAi().start()
    const app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-upstream-models-0000000000',
      ANTHROPIC_BASE_URL: anthropicUp.url,
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${openaiUp.url}/v1`,
      COMPACT_API_KEYS: `alice=${GATEWAY_KEY}`
    })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
      const claude = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: url, maxRetries: 0 })
      const gpt = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${url}/v1`, maxRetries: 0 })

      const claudes = []
      for await (const m of claude.models.list()) claudes.push(m.id)
      expect(claudes).toEqual(['claude-test'])
      expect(anthropicUp.gets[0]?.headers['x-api-key']).toBe('sk-ant-upstream-models-0000000000')
      expect(JSON.stringify(anthropicUp.gets[0]?.headers)).not.toContain(GATEWAY_KEY)

      const gpts = []
      for await (const m of gpt.models.list()) gpts.push(m.id)
      expect(gpts).toEqual(['gpt-test'])
      expect((await gpt.models.retrieve('gpt-test')).id).toBe('gpt-test')
      expect(openaiUp.gets.map((g) => g.path)).toEqual(['/v1/models', '/v1/models/gpt-test'])
      expect(openaiUp.gets[0]?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`)
      const missing = await gpt.models.retrieve('no-such-model').catch((err: unknown) => err)
      expect(missing).toBeInstanceOf(OpenAI.NotFoundError)
      // without the gateway's key, nothing reaches an upstream
      const stranger = new OpenAI({ apiKey: 'not-a-gateway-key', baseURL: `${url}/v1`, maxRetries: 0 })
      expect(await stranger.models.list().catch((err: unknown) => err)).toBeInstanceOf(OpenAI.AuthenticationError)
      expect(openaiUp.gets).toHaveLength(3)
    } finally {
      await app.close()
      await anthropicUp.close()
      await openaiUp.close()
    }
  })
})
