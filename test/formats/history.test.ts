import { describe, expect, it } from 'vitest'
import { adaptHistory, givenBack, problemAt } from '../../src/formats/history.js'
import { chatRules } from '../../src/formats/chat.js'

describe('turns read from another format and given back', () => {
  it('groups items into turns the core alternates, each block knowing its item and field', () => {
    const items = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'one' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'two' },
          { type: 'image_url', image_url: { url: 'data:,' } }
        ]
      },
      { role: 'assistant', content: 'three', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'shell', arguments: '{"command":"ls"}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'a.ts' }
    ]
    const adapted = adaptHistory(items, chatRules)
    if ('kind' in adapted) throw new Error(adapted.message)
    expect(adapted.starts).toEqual([1, 3, 4])
    expect(adapted.messages.map((m) => [m.role, (m.content as { type: string }[]).map((b) => b.type)])).toEqual([
      ['user', ['text', 'text', 'client_part']],
      ['assistant', ['text', 'tool_use']],
      ['user', ['tool_result']]
    ])
    expect(adapted.sources[0]).toEqual([
      { item: 1, field: '/content' },
      { item: 2, part: 0, field: '/content/0/text' },
      { item: 2, part: 1 }
    ])
    expect(adapted.sources[1]![1]).toEqual({ item: 3, field: '/tool_calls/0/function/arguments', as: 'json' })
  })

  it('gives back the system items, a summary item and the kept items, with a clipped string set in a copy of its item', () => {
    const items = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'old' },
      { role: 'assistant', content: 'older answer' },
      { role: 'user', content: 'keep me' },
      { role: 'assistant', content: 'long answer' }
    ]
    const adapted = adaptHistory(items, chatRules)
    if ('kind' in adapted) throw new Error(adapted.message)
    // as the core answers: the summary's blocks merged into the tail's first (user) message, the clipped tail after
    const compacted = {
      kept_from: 2,
      messages: [
        {
          role: 'user' as const,
          content: [
            { type: 'text', text: 'SUMMARY' },
            { type: 'text', text: 'note' },
            { type: 'text', text: 'keep me' }
          ]
        },
        { role: 'assistant' as const, content: [{ type: 'text', text: 'long…' }] }
      ],
      clips: [{ kind: 'text' as const, message_index: 3, path: '/messages/3/content', original_chars: 11, kept_chars: 5 }]
    }
    const given = givenBack(items, adapted, chatRules, compacted)
    expect(given.items).toEqual([
      items[0],
      {
        role: 'user',
        content: [
          { type: 'text', text: 'SUMMARY' },
          { type: 'text', text: 'note' }
        ]
      },
      items[3],
      { role: 'assistant', content: 'long…' }
    ])
    expect(given.items[2]).toBe(items[3])
    expect(items[4]!.content).toBe('long answer') // the client's item is not changed: a copy is
    expect(given).toMatchObject({
      kept_from: 3,
      compacted_messages: 2,
      kept_messages: 2,
      clips: [{ kind: 'text', message_index: 4, path: '/messages/4/content' }]
    })
  })

  it('names a problem at its item', () => {
    expect(problemAt('messages', 3, '/role', 'bad')).toEqual({ kind: 'history', path: '/messages/3/role', message: 'messages[3].role: bad' })
  })
})
