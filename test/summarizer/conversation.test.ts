import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { CORE_REDACTORS, type Message } from '../../src/compaction/index.js'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import { ConversationSummarizer, readAnswer } from '../../src/summarizer/conversation.js'
import { SummarizerFault } from '../../src/summarizer/faults.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { conversationPlan } from '../helpers/conversation-plan.js'

const KEY = 'sk-ant-client-own-key-000000000000'
const mark = { type: 'ephemeral' }

/** A client's session as Claude Code sends it: a long system prompt, tools, the newest message marked for the cache. */
function clientRequest(steps: number): { body: Record<string, unknown>; messages: Message[] } {
  const messages: Message[] = [user('Port the storage layer in src/storage to the new driver')]
  for (let i = 0; i < steps; i++)
    messages.push(
      ...shellStep(`toolu_c_${i}`, `sed -n 1,80p src/storage/part_${i}.ts`, `part ${i}: ${'q'.repeat(1_500)}`),
      assistant(`Read part ${i}.`),
      user(`Go on with part ${i + 1}`)
    )
  const last = messages[messages.length - 1]!
  messages[messages.length - 1] = { ...last, content: [{ type: 'text', text: String(last.content), cache_control: mark }] }
  return {
    messages,
    body: {
      model: 'claude-client-model',
      max_tokens: 2_000,
      system: [{ type: 'text', text: 'You are a coding agent. '.repeat(200), cache_control: mark }],
      tools: [{ name: 'bash', description: 'Run a shell command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }],
      tool_choice: { type: 'auto' },
      metadata: { user_id: 'user_abc_session_1' }
    }
  }
}

const answer = JSON.stringify({
  objective: 'Port the storage layer to the new driver',
  files_inspected: ['src/storage/part_0.ts'],
  next_steps: ['Go on with the next part']
})

let fake: FakeAnthropic
let client: Anthropic
beforeAll(async () => {
  fake = await new FakeAnthropic().start()
  client = new Anthropic({ apiKey: KEY, baseURL: fake.url, maxRetries: 0 })
})
afterAll(async () => fake.close())
beforeEach(() => {
  fake.requests.length = 0
  fake.fallback = { text: 'ok' }
})

function summarizerFor(steps: number): {
  summarizer: ConversationSummarizer
  request: () => Parameters<ConversationSummarizer['summarize']>[0]
  sent: ReturnType<typeof clientRequest>
} {
  const sent = clientRequest(steps)
  const plan = conversationPlan(sent.messages)
  return {
    sent,
    summarizer: new ConversationSummarizer({ request: sent.body, messages: sent.messages, client }),
    request: () => ({ plan, redactors: CORE_REDACTORS })
  }
}

describe("a summary written by the client's own model in its own conversation", () => {
  it("sends the client's request as it was (system, tools, tool_choice, messages, breakpoints) with the doctrine after it, and reads that prefix from the cache", async () => {
    const { sent, summarizer, request } = summarizerFor(12)
    // the client's own request, which writes its prefix to the upstream's cache
    await client.messages.create({ ...sent.body, messages: sent.messages } as unknown as Anthropic.MessageCreateParamsNonStreaming)
    fake.fallback = { text: answer }
    const result = await summarizer.summarize(request())
    expect(result.sections?.objective).toBe('Port the storage layer to the new driver')
    expect(result.report).toMatchObject({ kind: 'anthropic', model: 'claude-client-model', calls: 1, fallback_reason: null })

    const call = fake.requests[1]!
    // the client's own credentials, as its own request carried them
    expect(call.headers.authorization ?? call.headers['x-api-key']).toContain(KEY)
    for (const field of ['model', 'system', 'tools', 'tool_choice', 'metadata'] as const) expect(call.body[field]).toEqual(sent.body[field])
    // every message as the client sent it, the last one with the instruction appended after its own blocks
    const messages = call.body.messages as Message[]
    expect(messages.slice(0, -1)).toEqual(sent.messages.slice(0, -1))
    const last = messages[messages.length - 1]!.content as { type: string; text: string; cache_control?: unknown }[]
    expect(last.slice(0, -1)).toEqual(sent.messages[sent.messages.length - 1]!.content)
    expect(last.at(-1)!.text).toContain(DOCTRINE_TEXT)
    expect(last.at(-1)!.cache_control).toBeUndefined()
    // the prefix was the client's: read from the cache, all but the instruction
    const cache = call.cache!
    expect(cache.read / cache.tokens).toBeGreaterThan(0.8)
  })

  it('tells the model how many of the last messages stay verbatim, and where they begin', async () => {
    const { summarizer, request } = summarizerFor(6)
    fake.fallback = { text: answer }
    const kept = request().plan.cut.tail
    await summarizer.summarize(request())
    const text = JSON.stringify(fake.requests[0]!.body.messages.at(-1))
    expect(kept.length).toBeGreaterThan(0)
    expect(text).toContain(`before its last ${kept.length} message`)
  })

  it('retries once with what was wrong, in the same conversation, then gives up with the fault the fallback names', async () => {
    const { summarizer, request } = summarizerFor(4)
    fake.reply({ text: 'Here is the summary: the storage layer port.' }, { text: `\`\`\`json\n${answer}\n\`\`\`` })
    const result = await summarizer.summarize(request())
    expect(result.sections?.next_steps).toEqual(['Go on with the next part'])
    expect(result.report.calls).toBe(2)
    const retry = fake.requests[1]!.body.messages as { role: string; content: unknown }[]
    expect(retry.at(-2)).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'Here is the summary: the storage layer port.' }] })
    expect(String(retry.at(-1)!.content)).toContain('no JSON object')

    fake.requests.length = 0
    fake.reply({ text: '{"objective": 3}' }, { text: 'still no summary' })
    const failed = await summarizer.summarize(request()).catch((err: unknown) => err)
    expect(failed).toBeInstanceOf(SummarizerFault)
    expect((failed as SummarizerFault).reason).toBe('invalid_output')
    expect(fake.requests).toHaveLength(2)
  })

  it('gives up at once when the model calls a tool instead of answering', async () => {
    const { summarizer, request } = summarizerFor(4)
    fake.reply({ content: [{ type: 'tool_use', id: 'toolu_x', name: 'bash', input: { command: 'ls' } }] })
    const failed = await summarizer.summarize(request()).catch((err: unknown) => err)
    expect((failed as SummarizerFault).reason).toBe('invalid_output')
    expect(fake.requests).toHaveLength(1)
  })

  it('asks for room for the thinking the client enabled on top of the summary', async () => {
    const sent = clientRequest(4)
    const plan = conversationPlan(sent.messages)
    const thinking = new ConversationSummarizer({
      request: { ...sent.body, thinking: { type: 'enabled', budget_tokens: 4_000 } },
      messages: sent.messages,
      client
    })
    fake.fallback = { text: answer }
    await thinking.summarize({ plan, redactors: CORE_REDACTORS })
    const body = fake.requests[0]!.body as ReceivedRequest['body'] & { thinking: unknown }
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: 4_000 })
    expect(body.max_tokens).toBeGreaterThan(4_000)
  })
})

describe('an answer read as the sections', () => {
  it('takes the JSON object alone, fenced or among words, and names what is wrong otherwise', () => {
    for (const text of [answer, `\`\`\`json\n${answer}\n\`\`\``, `The summary:\n${answer}\nDone.`]) expect('sections' in readAnswer(text)).toBe(true)
    expect(readAnswer('no object')).toEqual({ error: 'the answer held no JSON object' })
    expect((readAnswer('{"objective": ') as { error: string }).error).toMatch(/no JSON object|does not parse/)
    expect((readAnswer('{"files_inspected": "one"}') as { error: string }).error).toMatch(/JSON object at \/files_inspected/)
  })
})
