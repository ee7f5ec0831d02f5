import { describe, expect, it } from 'vitest'
import { PromptCache, type ReceivedRequest } from './fake-anthropic.js'
import { messagesApiRefusal } from './messages-api-rules.js'

type Body = ReceivedRequest['body']
const mark = { type: 'ephemeral' }
const text = (t: string, cached = false) => ({ type: 'text', text: t, ...(cached ? { cache_control: mark } : {}) })
const body = (messages: Body['messages']): Body => ({
  model: 'm',
  max_tokens: 1,
  system: [text('You are an agent. '.repeat(50), true)] as unknown as string,
  tools: [],
  tool_choice: undefined,
  messages
})

describe('the fake upstream', () => {
  it('simulates the prompt cache: a breakpoint moved to the newest message reads the prefix written before it, a changed prefix reads nothing of it', () => {
    const cache = new PromptCache()
    const first = [
      { role: 'user', content: [text('task '.repeat(100))] },
      { role: 'assistant', content: [text('ok '.repeat(100))] },
      { role: 'user', content: [text('go on', true)] }
    ]
    const a = cache.take(body(first))
    expect(a.read).toBe(0)
    expect(a.written).toBe(a.tokens) // its last breakpoint is its last block
    const second = [
      ...first.slice(0, 2),
      { role: 'user', content: [text('go on')] },
      { role: 'assistant', content: [text('done')] },
      { role: 'user', content: [text('next', true)] }
    ]
    const b = cache.take(body(second))
    expect(b.read).toBe(a.tokens) // everything the first request sent, its breakpoint now gone
    expect(b.written).toBe(b.tokens - a.tokens) // and what it adds is written
    const edited = [{ role: 'user', content: [text('another task '.repeat(100))] }, ...second.slice(1)]
    const c = cache.take(body(edited))
    expect(c.read).toBeGreaterThan(0) // the system prompt's own breakpoint still reads
    expect(c.read).toBeLessThan(a.tokens - 100) // but not the messages after it
  })

  it('refuses what the Messages API refuses', () => {
    const ok = { model: 'm', messages: [{ role: 'user', content: 'hi' }] }
    expect(messagesApiRefusal(ok)).toBeUndefined()
    expect(messagesApiRefusal({ model: 'm', messages: [{ role: 'user', content: 'a\ud83d' }] })).toMatch(/no low surrogate/)
    expect(messagesApiRefusal({ model: 'm', messages: [{ role: 'user', content: [text('')] }] })).toMatch(/non-empty/)
    expect(messagesApiRefusal({ model: 'm', messages: [{ role: 'user', content: [{ ...text(''), cache_control: mark }] }] })).toMatch(
      /cache_control cannot be set for empty text/
    )
    const five = Array.from({ length: 5 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: [text(`m${i}`, true)] }))
    expect(messagesApiRefusal({ model: 'm', messages: five })).toMatch(/maximum of 4 blocks with cache_control/)
    expect(
      messagesApiRefusal({
        model: 'm',
        messages: [
          { role: 'system', content: 'x' },
          { role: 'user', content: 'hi' }
        ]
      })
    ).toMatch(/cannot be the first/)
    expect(
      messagesApiRefusal({
        model: 'm',
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'system', content: 'x' },
          { role: 'user', content: 'again' }
        ]
      })
    ).toMatch(/followed by an assistant/)
    const call = { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: {} }] }
    expect(messagesApiRefusal({ model: 'm', messages: [{ role: 'user', content: 'hi' }, call, { role: 'user', content: 'no result' }] })).toMatch(
      /without `tool_result`/
    )
    expect(
      messagesApiRefusal({
        model: 'm',
        messages: [{ role: 'user', content: 'hi' }, call, { role: 'user', content: [text('first'), { type: 'tool_result', tool_use_id: 't1', content: 'x' }] }]
      })
    ).toMatch(/must come first/)
  })
})
