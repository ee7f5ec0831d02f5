import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import { afterEach, describe, expect, it } from 'vitest'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeOpenAi, type OpenAiRequest } from '../helpers/fake-openai.js'

const CLIENT_KEY = 'sk-client-own-openai-key-000000000000'
const BUDGET = 12_000
const SYSTEM = 'You are a coding agent working in a repository. '.repeat(40)
const TOOL = {
  type: 'function' as const,
  name: 'bash',
  description: 'Run a shell command',
  strict: false,
  parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }
}

/** A summary call of the gateway's in the client's conversation: an item after the client's asks for the compaction. */
const isSummaryCall = (r: OpenAiRequest): boolean => JSON.stringify(r.body.messages ?? r.body.input ?? '').includes('<compaction-request>')

/** A Chat Completions session after `steps` steps of a shell tool. */
function chat(steps: number): OpenAI.Chat.Completions.ChatCompletionMessageParam[] {
  const out: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'Port the storage layer in src/storage to the new driver' }
  ]
  for (let i = 0; i < steps; i++) {
    out.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: `call_${i}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `sed -n 1,80p src/storage/part_${i}.ts` }) } }
        ]
      },
      { role: 'tool', tool_call_id: `call_${i}`, content: `part ${i}: ${'w'.repeat(1_400)}` },
      { role: 'assistant', content: `Read part ${i}.` },
      { role: 'user', content: `Go on with part ${i + 1}` }
    )
  }
  return out
}

/** The same session as Responses items. */
function responses(steps: number): OpenAI.Responses.ResponseInputItem[] {
  const out: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'Port the storage layer in src/storage to the new driver' }]
  for (let i = 0; i < steps; i++) {
    out.push(
      { type: 'function_call', call_id: `call_${i}`, name: 'bash', arguments: JSON.stringify({ command: `sed -n 1,80p src/storage/part_${i}.ts` }) },
      { type: 'function_call_output', call_id: `call_${i}`, output: `part ${i}: ${'w'.repeat(1_400)}` },
      { role: 'assistant', content: `Read part ${i}.` },
      { role: 'user', content: `Go on with part ${i + 1}` }
    )
  }
  return out
}

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(env: Record<string, string>): Promise<{ app: App; fake: FakeOpenAi; sdk: OpenAI }> {
  const fake = await new FakeOpenAi().start()
  opened.push(fake)
  fake.fallback = (r) =>
    isSummaryCall(r)
      ? {
          text: `Here it is:\n${JSON.stringify({ objective: 'Port the storage layer to the new driver (by the client model)', next_steps: ['Go on with the next part'] })}`
        }
      : { text: 'ok' }
  const app = await testApp({ OPENAI_BASE_URL: `${fake.url}/v1`, COMPACT_PRECOMPUTE_AT: '0.5', ...env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const sdk = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`, maxRetries: 0 })
  return { app, fake, sdk }
}

/** Sends the session turn by turn (each turn's background work settled first) until a request is compacted. */
async function untilCrossing(app: App, send: (steps: number) => Promise<Response>): Promise<string | null> {
  for (let steps = 1; steps < 60; steps++) {
    const response = await send(steps)
    await app.proxy.compactor.idle()
    if (response.headers.get('x-compaction') === 'compacted') return response.headers.get('x-compaction-summary-id')
  }
  throw new Error('never crossed')
}

const headers = (session: string) => ({ 'x-compaction-budget': String(BUDGET), 'x-session-id': session })

describe("Chat Completions and Responses summaries by the conversation's own model, in the conversation", () => {
  it("Chat Completions: written ahead in the client's conversation with its key, its prefix read from the upstream's cache, taken at the crossing", async () => {
    const { app, fake, sdk } = await gateway({})
    const send = async (steps: number) =>
      (
        await sdk.chat.completions
          .create(
            {
              model: 'gpt-client-model',
              messages: chat(steps),
              tools: [{ type: 'function', function: { name: TOOL.name, description: TOOL.description, parameters: TOOL.parameters } }]
            },
            { headers: headers('chat-own-1') }
          )
          .withResponse()
      ).response
    const summaryId = await untilCrossing(app, send)
    expect(summaryId).toBeTruthy()
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    const call = calls[0]!
    expect(call.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`)
    expect(call.body.model).toBe('gpt-client-model')
    expect(call.body.stream).not.toBe(true)
    // the conversation as it was forwarded, then the doctrine as one more user message
    const forwarded = fake.requests.filter((r) => !isSummaryCall(r))
    const before = forwarded.filter((r) => r.body.messages.length === call.body.messages.length - 1)
    expect(before.length).toBeGreaterThan(0)
    expect(call.body.messages.slice(0, -1)).toEqual(before.at(-1)!.body.messages)
    expect(call.body.tools).toEqual(before.at(-1)!.body.tools)
    expect(JSON.stringify(call.body.messages.at(-1))).toContain(JSON.stringify(DOCTRINE_TEXT).slice(1, 200))
    // made once the client's own request of that prefix was answered: the upstream reads it from cache
    expect(call.cache!.cached / call.cache!.prompt).toBeGreaterThan(0.8)
    // taken at the crossing: the forwarded history carries the client model's summary, recorded as the model's
    expect(JSON.stringify(forwarded.at(-1)!.body.messages)).toContain('by the client model')
    const records = await app.inject({ url: '/v1/sessions/chat-own-1/compactions' })
    expect(records.json().compactions[0].summarizer).toMatchObject({ kind: 'openai', model: 'gpt-client-model', calls: 1 })
    expect(fake.refused).toEqual([])
  })

  it('Responses: the same, its instructions and tools as sent, stored nowhere', async () => {
    const { app, fake, sdk } = await gateway({})
    const send = async (steps: number) =>
      (
        await sdk.responses
          .create({ model: 'gpt-client-model', instructions: SYSTEM, input: responses(steps), tools: [TOOL], store: true }, { headers: headers('resp-own-1') })
          .withResponse()
      ).response
    await untilCrossing(app, send)
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    const call = calls[0]!
    expect(call.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`)
    expect(call.body).toMatchObject({ model: 'gpt-client-model', instructions: SYSTEM, tools: [TOOL], store: false })
    expect(call.cache!.cached / call.cache!.prompt).toBeGreaterThan(0.8)
    // the kept items counted in the client's items, not in the core's messages
    const asked = JSON.stringify((call.body.input as unknown[]).at(-1))
    expect(asked).toMatch(/its last \d+ message/)
    const forwarded = fake.requests.filter((r) => !isSummaryCall(r))
    expect(JSON.stringify(forwarded.at(-1)!.body.input)).toContain('by the client model')
    expect(fake.refused).toEqual([])
  })

  it('an answer that is not the JSON object is asked again once in the same conversation, then the extractive summary stands in', async () => {
    const { app, fake, sdk } = await gateway({})
    fake.fallback = (r) => (isSummaryCall(r) ? { text: 'I would rather keep working.' } : { text: 'ok' })
    const send = async (steps: number) =>
      (await sdk.chat.completions.create({ model: 'gpt-client-model', messages: chat(steps) }, { headers: headers('chat-own-2') }).withResponse()).response
    await untilCrossing(app, send)
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(2)
    expect(calls[1]!.body.messages.slice(0, calls[0]!.body.messages.length)).toEqual(calls[0]!.body.messages)
    expect(JSON.stringify(calls[1]!.body.messages.at(-1))).toContain('Answer with the JSON object only')
    const records = await app.inject({ url: '/v1/sessions/chat-own-2/compactions' })
    expect(records.json().compactions[0].summarizer).toMatchObject({ kind: 'extractive', fallback_reason: 'invalid_output' })
  })

  it("are written with the gateway's own OPENAI_API_KEY where it forwards with one, its cache read", async () => {
    const GATEWAY_KEY = 'sk-gateway-own-openai-key-00000000000'
    const { app, fake, sdk } = await gateway({ OPENAI_API_KEY: GATEWAY_KEY })
    const send = async (steps: number) =>
      (await sdk.chat.completions.create({ model: 'gpt-client-model', messages: chat(steps) }, { headers: headers('chat-own-4') }).withResponse()).response
    await untilCrossing(app, send)
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    expect(calls[0]!.headers.authorization).toBe(`Bearer ${GATEWAY_KEY}`)
    expect(calls[0]!.body.model).toBe('gpt-client-model')
    expect(calls[0]!.cache!.cached / calls[0]!.cache!.prompt).toBeGreaterThan(0.8)
    expect(fake.refused).toEqual([])
  })

  it('are not made with COMPACT_SUMMARIZER=extractive, nor with COMPACT_PROXY_SUMMARIES=gateway and the gateway a model of its own', async () => {
    for (const env of [
      { COMPACT_SUMMARIZER: 'extractive' },
      { OPENAI_API_KEY: 'sk-gateway-own-openai-key-00000000000', COMPACT_SUMMARIZER: 'openai', COMPACT_PROXY_SUMMARIES: 'gateway' }
    ] as Record<string, string>[]) {
      const { app, fake, sdk } = await gateway(env)
      const send = async (steps: number) =>
        (await sdk.chat.completions.create({ model: 'gpt-client-model', messages: chat(steps) }, { headers: headers('chat-own-3') }).withResponse()).response
      await untilCrossing(app, send)
      expect(fake.requests.filter(isSummaryCall), JSON.stringify(env)).toEqual([])
    }
  })
})
