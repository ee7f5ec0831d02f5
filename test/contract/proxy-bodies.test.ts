import { describe, expect, it } from 'vitest'
import { ChatCompletionsBody, GenerateContentBody, MessagesBody, ResponsesBody, ResponsesCompactBody } from '../../src/contract/proxy-bodies.js'
import { bodyReader } from '../../src/contract/validation.js'

const messages = bodyReader(MessagesBody)
const chat = bodyReader(ChatCompletionsBody)
const responses = bodyReader(ResponsesBody)
const responsesCompact = bodyReader(ResponsesCompactBody)
const gemini = bodyReader(GenerateContentBody)

function problem(read: ReturnType<typeof bodyReader>, body: unknown): { message: string; path?: string } {
  const checked = read(body)
  if (checked.ok) throw new Error('the body was taken')
  return { message: checked.message, path: checked.path }
}

describe("the proxies' body schemas", () => {
  it('take what the clients send, every field the gateway does not read left to the upstream (a number JSON.parse makes Infinity included)', () => {
    const claudeCode = {
      model: 'claude-sonnet-4-5',
      max_tokens: Infinity,
      stream: true,
      system: [{ type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } }],
      tools: [{ name: 'Bash', input_schema: { type: 'object' } }],
      metadata: { user_id: 'user_1_account__session_2' },
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'fix it' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'a.ts' }] }
      ]
    }
    expect(messages(claudeCode)).toEqual({ ok: true, value: claudeCode })
    expect(messages({ model: 7, messages: [], metadata: 'not an object' }).ok).toBe(true)
    expect(chat({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }, 'an item the format reads'], stream: 'yes' }).ok).toBe(true)
    // the history held upstream: no `input` at all
    expect(responses({ model: 'gpt', previous_response_id: 'resp_1' }).ok).toBe(true)
    expect(responses({ model: 'gpt', input: 'one message', instructions: null }).ok).toBe(true)
    expect(responsesCompact({ model: 'gpt', input: [{ type: 'message', role: 'user', content: 'hi' }] }).ok).toBe(true)
    // countTokens may carry its request whole instead of `contents`
    expect(gemini({ generateContentRequest: { model: 'models/gemini', contents: [] } }).ok).toBe(true)
    expect(gemini({ contents: 'read by the format where the history may pass its budget' }).ok).toBe(true)
  })

  it('refuse what the gateway reads and cannot, naming the place in the words of every other route', () => {
    expect(problem(messages, [])).toEqual({ message: 'body must be an object', path: '/' })
    expect(problem(messages, { model: 'm' })).toEqual({ message: 'body needs the field `messages`', path: '/' })
    expect(problem(messages, { messages: [{ role: 'robot', content: 'x' }] })).toEqual({
      message: 'body.messages[0].role must be one of "user", "assistant", "system"',
      path: '/messages/0/role'
    })
    expect(problem(messages, { messages: [{ role: 'user', content: [{ text: 'no type' }] }] }).path).toBe('/messages/0/content/0')
    expect(problem(messages, { messages: [], system: ['x'] }).path).toBe('/system/0')
    expect(problem(messages, { messages: [], tools: {} })).toEqual({ message: 'body.tools must be an array', path: '/tools' })
    expect(problem(chat, { model: 'm', messages: {} })).toEqual({ message: 'body.messages must be an array', path: '/messages' })
    expect(problem(chat, { messages: [], tools: [3] }).path).toBe('/tools/0')
    expect(problem(responses, { input: 5 }).message).toBe('body.input must be a string or an array')
    expect(problem(responses, { input: [], instructions: 3 }).path).toBe('/instructions')
    expect(problem(gemini, { contents: [], tools: 'search' }).path).toBe('/tools')
  })
})
