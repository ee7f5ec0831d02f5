import OpenAI from 'openai'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { CORE_REDACTORS } from '../../src/compaction/index.js'
import { SummarizerFault } from '../../src/summarizer/faults.js'
import { OpenAiConversationSummarizer } from '../../src/summarizer/openai-conversation.js'
import { FakeOpenAi } from '../helpers/fake-openai.js'
import { planOfItems } from '../helpers/conversation-plan.js'

const KEY = 'sk-client-own-openai-key-000000000000'
const answer = JSON.stringify({ objective: 'Port the storage layer to the new driver', next_steps: ['Go on with the next part'] })

/** A Chat Completions body as an agent sends it: a system message, tools, steps of a shell tool (each result an item of its own). */
function chatBody(steps: number): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a coding agent. '.repeat(200) },
    { role: 'user', content: 'Port the storage layer in src/storage to the new driver' }
  ]
  for (let i = 0; i < steps; i++) {
    messages.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: `call_${i}`, type: 'function', function: { name: 'bash', arguments: `{"command":"cat part_${i}.ts"}` } },
          { id: `call_${i}b`, type: 'function', function: { name: 'bash', arguments: `{"command":"wc -l part_${i}.ts"}` } }
        ]
      },
      { role: 'tool', tool_call_id: `call_${i}`, content: `part ${i}: ${'q'.repeat(1_500)}` },
      { role: 'tool', tool_call_id: `call_${i}b`, content: '80 lines' },
      { role: 'assistant', content: `Read part ${i}.` },
      { role: 'user', content: `Go on with part ${i + 1}` }
    )
  }
  return {
    model: 'gpt-client-model',
    messages,
    tools: [{ type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }],
    stream: true,
    stream_options: { include_usage: true }
  }
}

let fake: FakeOpenAi
let client: OpenAI
beforeAll(async () => {
  fake = await new FakeOpenAi().start()
  client = new OpenAI({ apiKey: KEY, baseURL: `${fake.url}/v1`, maxRetries: 0 })
})
afterAll(async () => fake.close())
beforeEach(() => {
  fake.requests.length = 0
  fake.fallback = { text: 'ok' }
})

function summarizerFor(steps: number) {
  const body = chatBody(steps)
  const { plan, starts } = planOfItems(body.messages as Record<string, unknown>[], 'openai-chat')
  const summarizer = new OpenAiConversationSummarizer({ api: 'chat', client, forwarded: () => ({ body, starts }) }, 'gpt-client-model')
  return { body, plan, starts, summarizer, request: () => ({ plan, redactors: CORE_REDACTORS }) }
}

describe("a Chat Completions summary written by the client's own model in its own conversation", () => {
  it("sends the body as it was forwarded, not streamed, with the doctrine after it, and counts the kept part in the client's own items", async () => {
    const { body, plan, starts, summarizer, request } = summarizerFor(12)
    fake.fallback = { text: `\`\`\`json\n${answer}\n\`\`\`` }
    const result = await summarizer.summarize(request())
    expect(result.sections?.objective).toBe('Port the storage layer to the new driver')
    expect(result.report).toMatchObject({ kind: 'openai', model: 'gpt-client-model', calls: 1, fallback_reason: null })
    const [call] = fake.requests
    const sent = body.messages as unknown[]
    expect(call!.body.messages.slice(0, sent.length)).toEqual(sent)
    expect(call!.body.tools).toEqual(body.tools)
    expect(call!.body.stream).not.toBe(true)
    expect(call!.body.stream_options).toBeUndefined()
    // the core's messages merge each step's two results into one; the instruction counts the client's items
    const instruction = String(call!.body.messages.at(-1)?.content)
    const counted = Number(/its last (\d+) message/.exec(instruction)?.[1])
    expect(plan.cut.tail.length).toBeGreaterThan(0)
    expect(counted).toBeGreaterThan(plan.cut.tail.length)
    // the first item it counts is the client's item the kept part begins at, a user's message here
    expect(sent[sent.length - counted]).toMatchObject({ role: 'user', content: expect.stringMatching(/^Go on with part \d+$/) })
    expect(sent.length - counted).toBe(starts[plan.cut.cut])
    expect(call!.headers.authorization).toBe(`Bearer ${KEY}`)
  })

  it('a refusal is a fault of its own; a tool call is no summary and is not asked again', async () => {
    fake.fallback = { refusal: 'I cannot help with that.' }
    const refused = await summarizerFor(12)
      .summarizer.summarize(summarizerFor(12).request())
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(SummarizerFault)
    expect((refused as SummarizerFault).reason).toBe('refusal')
    fake.requests.length = 0
    fake.fallback = { toolCalls: [{ id: 'call_x', name: 'bash', arguments: '{"command":"ls"}' }] }
    const called = await summarizerFor(12)
      .summarizer.summarize(summarizerFor(12).request())
      .catch((e: unknown) => e)
    expect((called as SummarizerFault).reason).toBe('invalid_output')
    expect(fake.requests).toHaveLength(1)
  })

  it('says so where the request it continues was never forwarded', async () => {
    const { plan } = summarizerFor(12)
    const summarizer = new OpenAiConversationSummarizer({ api: 'chat', client, forwarded: () => undefined }, 'gpt-client-model')
    await expect(summarizer.summarize({ plan, redactors: CORE_REDACTORS })).rejects.toThrow(/never forwarded/)
  })
})
