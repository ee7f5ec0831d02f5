import { describe, expect, it } from 'vitest'
import { ChatCompletionsBody, ResponsesBody } from '../../../src/contract/proxy-bodies.js'
import { bodyReader } from '../../../src/contract/validation.js'
import { ProxiedBody } from '../../../src/proxy/body.js'
import { forwardedConversation, openAiDialect, responsesCompactionModel } from '../../../src/proxy/dialects/openai.js'
import type { OpenAiBody } from '../../../src/proxy/openai.js'

const body = (value: object): ProxiedBody => new ProxiedBody(Buffer.from(JSON.stringify(value)))
const chatCheck = bodyReader<OpenAiBody>(ChatCompletionsBody)
const responsesCheck = bodyReader<OpenAiBody>(ResponsesBody)

const chat = {
  model: 'gpt-any',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'List the files' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'a.ts' },
    { role: 'user', content: 'Go on' }
  ]
}

describe("OpenAI's APIs' dialect", () => {
  it("reads Chat Completions into the core's turns and places a turn's problem at the client's own item", () => {
    const dialect = openAiDialect('chat', 'chat_completions', chatCheck)
    const read = dialect.read(body(chat), () => true)
    if (!('read' in read)) throw new Error('not read')
    // the system message is the system prompt; the core's second message is the assistant's call at item 2
    expect(read.parts.messages[0]).toMatchObject({ role: 'user' })
    expect(dialect.place!(read.read, '/messages/1/content/0')).toBe('/messages/2')
    // written back as the client's own items where nothing was compacted: the body as it came
    const same = JSON.parse(dialect.write(body(chat), read.read, undefined, undefined, true).toString('utf8'))
    expect(same.messages).toEqual(chat.messages)
    expect(same.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(['gateway_recall'])
  })

  it("carries each endpoint's own features: the Responses API's compaction, the recall tool and summaries but on the upstream's own compaction", () => {
    const chatDialect = openAiDialect('chat', 'chat_completions', chatCheck)
    const responses = openAiDialect('responses', 'responses', responsesCheck)
    const compact = openAiDialect('responses', 'responses_compact', responsesCheck)
    expect(chatDialect).toMatchObject({ usage: 'chat', recallTool: 'chat' })
    expect(chatDialect.responsesCompaction).toBeUndefined()
    expect(responses).toMatchObject({ usage: 'responses', recallTool: 'responses', responsesCompaction: true })
    expect(compact.recallTool).toBeUndefined()
    expect(compact.clientSummarizer).toBeUndefined()
    expect(compact.responsesCompaction).toBeUndefined()
  })

  it('reads back the body a request was forwarded as, with where each turn starts among its items', () => {
    expect(forwardedConversation(undefined, 'chat', chatCheck)).toBeUndefined()
    const read = forwardedConversation(Buffer.from(JSON.stringify(chat)), 'chat', chatCheck)
    expect(read?.body).toEqual(chat)
    // the system message is the system prompt; the tool's result and the user's next message are one user turn, from item 3
    expect(read?.starts).toEqual([1, 2, 3])
  })

  it("has the Responses API's own compaction summarized by the conversation's own model where the operator lets it, by none where not", () => {
    expect(responsesCompactionModel(undefined, responsesCheck)).toBeUndefined()
    const settings = {
      baseUrl: 'http://127.0.0.1:9',
      openAiBaseUrl: 'http://127.0.0.1:9/v1',
      geminiBaseUrl: 'http://127.0.0.1:9',
      timeoutMs: 1_000,
      fallback: 'extractive' as const
    }
    const asked = responsesCompactionModel(settings, responsesCheck)?.(body({ model: 'gpt-codex-test', input: 'List the files' }), {
      authorization: 'Bearer sk-test-client'
    })
    expect(asked?.([]).kind).toBe('openai')
  })
})
