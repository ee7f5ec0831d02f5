import { describe, expect, it } from 'vitest'
import { type Message, validateHistory } from '../../src/compaction/index.js'
import { allTranscripts } from '../helpers/corpus.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

describe('validateHistory', () => {
  it('accepts every corpus transcript', () => {
    for (const t of allTranscripts()) expect(validateHistory(t.messages), t.name).toBeUndefined()
  })

  it('accepts a pending tool call in the final assistant message', () => {
    expect(validateHistory([user('go'), assistant(call('a', 'bash', { command: 'ls' }))])).toBeUndefined()
  })

  it('names the unanswered tool_use', () => {
    const p = validateHistory([user('go'), assistant('x', call('a', 'bash', { command: 'ls' })), user('and?')])
    expect(p).toEqual({ kind: 'history', path: '/messages/1/content/1', message: expect.stringContaining('messages[1].content[1]') })
    expect(p?.message).toContain('"a" is not answered')
  })

  it('names a tool_result that answers nothing in the preceding message', () => {
    const p = validateHistory([user('go'), assistant(call('a', 'bash', {})), results(result('a', 'ok'), result('zzz', 'what'))])
    expect(p?.path).toBe('/messages/2/content/1')
    expect(p?.kind).toBe('history')
  })

  it('rejects a tool_result answering a call two messages back', () => {
    const p = validateHistory([user('go'), assistant(call('a', 'bash', {})), results(result('a', 'ok')), assistant('done'), results(result('a', 'again'))])
    expect(p?.path).toBe('/messages/4/content/0')
  })

  it('requires the first message to be the user and roles to alternate', () => {
    expect(validateHistory([assistant('hi')])?.path).toBe('/messages/0')
    expect(validateHistory([user('a'), user('b')])?.message).toContain('messages[1]')
  })

  it('reports missing block fields as shape problems', () => {
    const p = validateHistory([user('go'), { role: 'assistant', content: [{ type: 'tool_use', name: 'x', input: {} }] }])
    expect(p).toMatchObject({ kind: 'shape', path: '/messages/1/content/0' })
  })

  it('rejects a tool_use id used twice and a double answer', () => {
    expect(validateHistory([user('go'), assistant(call('a', 'x', {}), call('a', 'y', {}))])?.path).toBe('/messages/1/content/1')
    expect(validateHistory([user('go'), assistant(call('a', 'x', {})), results(result('a', '1'), result('a', '2'))])?.path).toBe('/messages/2/content/1')
  })

  it('lets unknown block types through', () => {
    expect(validateHistory([{ role: 'user', content: [{ type: 'future_block', payload: 1 }] }])).toBeUndefined()
  })

  describe('mid-conversation system messages', () => {
    const sys = (text: string): Message => ({ role: 'system', content: text })
    it('are accepted where the Messages API places them: after a user message, before an assistant turn or last', () => {
      expect(validateHistory([user('go'), sys('Answer in French.'), assistant('oui')])).toBeUndefined()
      expect(validateHistory([user('go'), sys('Answer in French.')])).toBeUndefined()
      expect(
        validateHistory([user('go'), assistant(call('a', 'bash', {})), results(result('a', 'ok')), sys('now be brief'), assistant('done')])
      ).toBeUndefined()
      expect(
        validateHistory([
          user('go'),
          {
            role: 'system',
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' }
            ]
          },
          assistant('x')
        ])
      ).toBeUndefined()
      const server: Message = { role: 'assistant', content: [{ type: 'server_tool_use', id: 's1', name: 'web_search', input: {} }] }
      expect(validateHistory([user('go'), server, sys('cite sources'), assistant('x')])).toBeUndefined()
    })

    it('are refused elsewhere, naming the place and the rule', () => {
      const cases: [Message[], string, string][] = [
        [[sys('x'), user('go')], '/messages/0', 'the first message must have role "user"'],
        [[user('go'), assistant('a'), sys('x'), assistant('b')], '/messages/2', 'must immediately follow a user message'],
        [[user('go'), sys('x'), user('again')], '/messages/1', 'followed by an assistant message'],
        [[user('go'), sys('x'), sys('y'), assistant('a')], '/messages/1', 'consecutive system messages'],
        [
          [user('go'), { role: 'system', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: '' } }] }, assistant('a')],
          '/messages/1/content/0',
          'text blocks only'
        ],
        [[user('go'), { role: 'system', content: [{ type: 'text' }] }, assistant('a')], '/messages/1/content/0', 'string `text`']
      ]
      for (const [history, path, words] of cases) {
        const p = validateHistory(history)
        expect(p?.path, JSON.stringify(history)).toBe(path)
        expect(p?.message).toContain(words)
      }
    })

    it('leave the alternation of the turns around them as it was', () => {
      expect(validateHistory([user('go'), sys('x'), assistant('a'), assistant('b')])?.message).toContain('two "assistant" messages in a row')
      expect(validateHistory([user('go'), sys('x'), assistant(call('a', 'bash', {})), user('no answer')])?.path).toBe('/messages/2/content/0')
    })
  })
})
