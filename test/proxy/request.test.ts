import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/contract/errors.js'
import {
  MAX_SESSION_LENGTH,
  type ProxyParts,
  farUnderBudget,
  budgetTokensOf,
  derivedSession,
  proxySession,
  readMessagesRequest
} from '../../src/proxy/request.js'
import { type Message, promptTokens } from '../../src/compaction/index.js'
import { assistant, user } from '../helpers/history.js'

const refusal = (fn: () => unknown): { status: number; message: string; path: string | undefined } => {
  try {
    fn()
  } catch (err) {
    if (err instanceof GatewayError) return { status: err.status, message: err.message, path: err.path }
    throw err
  }
  throw new Error('expected a refusal')
}

describe('readMessagesRequest', () => {
  it('reads messages, system, tools and metadata.user_id, leaving every other field to the upstream', () => {
    const parts = readMessagesRequest({
      model: 'm',
      max_tokens: 5,
      system: 'be brief',
      tools: [{ name: 't' }],
      metadata: { user_id: 'u-1' },
      messages: [{ role: 'user', content: 'hi' }],
      thinking: { type: 'enabled' }
    })
    expect(parts).toEqual({ messages: [{ role: 'user', content: 'hi' }], system: 'be brief', tools: [{ name: 't' }], userId: 'u-1' })
  })

  it('names the place of what it cannot estimate', () => {
    expect(refusal(() => readMessagesRequest([]))).toEqual({ status: 400, message: 'body must be an object', path: '/' })
    expect(refusal(() => readMessagesRequest({ model: 'm' }))).toEqual({ status: 400, message: 'body needs the field `messages`', path: '/' })
    expect(refusal(() => readMessagesRequest({ messages: [null] })).path).toBe('/messages/0')
    expect(refusal(() => readMessagesRequest({ messages: [{ role: 'user', content: 3 }] })).path).toBe('/messages/0/content')
    expect(refusal(() => readMessagesRequest({ messages: [{ role: 'user', content: [{ text: 'no type' }] }] })).path).toBe('/messages/0/content/0')
    expect(refusal(() => readMessagesRequest({ messages: [], system: 7 })).path).toBe('/system')
    expect(refusal(() => readMessagesRequest({ messages: [], system: ['x'] })).path).toBe('/system/0')
    expect(refusal(() => readMessagesRequest({ messages: [], tools: {} })).path).toBe('/tools')
  })
})

describe('proxySession and budgetTokensOf', () => {
  it('takes the session from the header, else metadata.user_id, hashing one too long to keep', () => {
    expect(proxySession({ 'x-compaction-session': ' s-1 ', 'x-claude-code-session-id': 'cc' }, 'u')).toBe('s-1')
    expect(proxySession({}, 'user_abc')).toBe('user_abc')
    expect(proxySession({}, undefined)).toBeUndefined()
    const long = proxySession({}, 'u'.repeat(MAX_SESSION_LENGTH + 1))
    expect(long).toMatch(/^user-[0-9a-f]{64}$/)
    expect(proxySession({}, 'u'.repeat(MAX_SESSION_LENGTH + 1))).toBe(long)
    expect(refusal(() => proxySession({ 'x-compaction-session': 'x'.repeat(MAX_SESSION_LENGTH + 1) }, undefined)).path).toBe('/headers/x-compaction-session')
    expect(refusal(() => proxySession({ 'x-compaction-session': '  ' }, undefined)).status).toBe(400)
    // the session ids agents send: Claude Code's, then opencode's and others', before metadata.user_id
    expect(proxySession({ 'x-claude-code-session-id': '4b20-ecd6', 'x-session-id': 'other' }, '{"session_id":"4b20-ecd6"}')).toBe('4b20-ecd6')
    expect(proxySession({ 'x-session-id': 'ses_1' }, undefined)).toBe('ses_1')
    expect(proxySession({ 'x-session-affinity': 'ses_2' }, 'u')).toBe('ses_2')
    expect(proxySession({ 'x-session-id': '   ' }, 'u')).toBe('u')
    // ids records could not keep or give back: refused from the gateway's own header, hashed from a client's
    for (const bad of ['.', '..', 'a\u0000b', 'tab\there'])
      expect(refusal(() => proxySession({ 'x-compaction-session': bad }, undefined)).path).toBe('/headers/x-compaction-session')
    expect(proxySession({ 'x-session-id': '..' }, undefined)).toMatch(/^user-[0-9a-f]{64}$/)
    expect(proxySession({}, 'a\u0000b')).toMatch(/^user-[0-9a-f]{64}$/)
  })

  it('takes the budget from the header (an integer of at least 1000, or off), else the server default', () => {
    expect(budgetTokensOf(undefined, 45_000)).toBe(45_000)
    expect(budgetTokensOf('120000', 45_000)).toBe(120_000)
    expect(budgetTokensOf('off', 45_000)).toBe('off')
    for (const bad of ['999', '12.5', '-2000', 'lots', '', '1e6'])
      expect(refusal(() => budgetTokensOf(bad, 45_000)).path, bad).toBe('/headers/x-compaction-budget')
  })
})

describe('farUnderBudget', () => {
  it('bounds the estimate from above by the bytes, and never for a body that may hold an image or a document', () => {
    const body = (messages: Message[]): Buffer => Buffer.from(JSON.stringify({ model: 'm', messages }))
    const small = [user('hi'), assistant('hello')]
    expect(farUnderBudget(body(small), 100)).toBe(true)
    // what it rests on: a history's bytes / 4 are never under its estimate, whatever its text holds
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.string({ unit: 'binary', maxLength: 300 })), { minLength: 1, maxLength: 20 }), (turns) => {
        const messages = turns.map(([asBlocks, text], i): Message => ({
          role: i % 2 === 0 ? 'user' : 'assistant',
          content: asBlocks ? [{ type: 'text', text }] : text
        }))
        expect(body(messages).length / 4).toBeGreaterThanOrEqual(promptTokens(messages, undefined, undefined) - 1)
      }),
      { numRuns: 300 }
    )
    expect(farUnderBudget(body(small), 1)).toBe(false)
    const image: Message[] = [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }]
    expect(farUnderBudget(body(image), 1_000_000)).toBe(false)
    const document: Message[] = [{ role: 'user', content: [{ type: 'document', source: { type: 'text', data: 'x' } }] }]
    expect(farUnderBudget(body(document), 1_000_000)).toBe(false)
    // however the JSON is spaced, wherever the block stands; a word "image" in a text is no block
    expect(farUnderBudget(Buffer.from(JSON.stringify({ model: 'm', messages: image }, null, 2)), 1_000_000)).toBe(false)
    expect(farUnderBudget(Buffer.from('"image"'), 1_000_000)).toBe(false)
    expect(farUnderBudget(body([user('paste an image'), assistant('a "document" in quotes: \\"document\\"')]), 1_000_000)).toBe(true)
  })
})

describe('derivedSession', () => {
  const system = [{ type: 'text' as const, text: 'You are a release bot.' }]
  const ask = { role: 'user' as const, content: 'Cut the release' }
  const run = (answer: string): ProxyParts['messages'][] => {
    const first: ProxyParts['messages'] = [ask]
    const second: ProxyParts['messages'] = [...first, { role: 'assistant', content: answer }, { role: 'user', content: 'go on' }]
    const third: ProxyParts['messages'] = [...second, { role: 'assistant', content: 'done' }, { role: 'user', content: 'and the notes' }]
    return [first, second, third]
  }

  it('keeps one id for every request of a conversation after its first, and tells two runs of the same task apart by their first answers', () => {
    const [, a2, a3] = run('Cutting 1.4.0 from main.').map((messages) => derivedSession({ system, messages }))
    const [, b2] = run('Cutting 1.4.0 from the release branch.').map((messages) => derivedSession({ system, messages }))
    expect(a3).toBe(a2)
    expect(b2).not.toBe(a2)
    expect(a2).toMatch(/^conv-[0-9a-f]{32}$/)
    // the same run, sent again, is the same conversation
    expect(derivedSession({ system, messages: run('Cutting 1.4.0 from main.')[2]! })).toBe(a3)
  })
})
