import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Message, type Rewrite, hasPrefixCheck, holdsThinking, openLoopWithoutThinking, unbindThinking } from '../../src/compaction/index.js'
import { checkThinkingPrefix, producedThinking, thinkingOn } from '../helpers/preserved-thinking.js'

const thought = (n: number) => ({ type: 'thinking', thinking: '', signature: `sig-${n}` })
const call = (id: string) => ({ type: 'tool_use', id, name: 'bash', input: { command: 'ls' } })
const firstBlock = (m: Message | undefined): Record<string, unknown> | undefined => (Array.isArray(m?.content) ? m.content[0] : undefined)
const result = (id: string, text = 'out') => ({ type: 'tool_result', tool_use_id: id, content: text })

describe('thinking bound to its prefix', () => {
  it('takes the thinking out of the assistant messages a rewrite made stale, and only those', () => {
    const messages: Message[] = [
      { role: 'user', content: 'task' },
      { role: 'assistant', content: [thought(1), call('a')] },
      { role: 'user', content: [result('a')] },
      { role: 'assistant', content: [thought(2), call('b')] },
      { role: 'user', content: [result('b')] },
      { role: 'assistant', content: [thought(3), { type: 'text', text: 'done' }] }
    ]
    const { messages: out, stripped, left } = unbindThinking(messages, [{ from: 2, bound: 5 }])
    expect(stripped).toBe(1)
    expect(left).toEqual([])
    expect(out[1]).toBe(messages[1])
    expect(out[3]).toEqual({ role: 'assistant', content: [call('b')] })
    expect(out[5]).toBe(messages[5])
    // an assistant message of thinking alone is left out (the API refuses an empty one)
    const alone = unbindThinking(
      [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [thought(9)] },
        { role: 'user', content: 'go on' }
      ],
      [{ from: 0, bound: 3 }]
    )
    expect(alone.left).toEqual([1])
    expect(alone.messages.map((m) => m.role)).toEqual(['user', 'user'])
    expect(holdsThinking(messages, 4)).toBe(true)
    expect(holdsThinking(out, 2, 5)).toBe(false)
  })

  it('knows an open tool loop whose last assistant message does not begin with thinking', () => {
    const open: Message[] = [
      { role: 'user', content: 'task' },
      { role: 'assistant', content: [call('a')] },
      { role: 'user', content: [result('a')] }
    ]
    expect(openLoopWithoutThinking(open)).toBe(true)
    expect(openLoopWithoutThinking([open[0] as Message, { role: 'assistant', content: [thought(1), call('a')] }, open[2] as Message])).toBe(false)
    expect(openLoopWithoutThinking([...open, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'next' }])).toBe(false)
  })

  it('names the models with preserved thinking, and every later one', () => {
    for (const m of ['claude-opus-5-5', 'claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-fable-5-1', 'claude-mythos-5-2', 'claude-opus-6'])
      expect(hasPrefixCheck(m), m).toBe(true)
    for (const m of [
      'claude-opus-4-8',
      'claude-sonnet-4-6',
      'claude-3-7-sonnet-20250219',
      'claude-opus-5',
      'claude-fable-5',
      'claude-mythos-preview',
      'gpt-5.1',
      undefined
    ])
      expect(hasPrefixCheck(m), String(m)).toBe(false)
  })

  /**
   * A conversation with a model that binds thinking to its prefix, through a gateway that rewrites it: a summary
   * in place of its first turns at some requests (re-applied byte for byte after), tool results cleared at
   * others (re-applied too). Each forward takes out the thinking each rewrite made stale; the model's check,
   * written from the documentation (test/helpers/preserved-thinking.ts), accepts every forwarded request, and
   * every thinking block produced since the last rewrite is sent back.
   */
  it('forwards every rewritten history so that the prefix check accepts it (property)', () => {
    const step = fc.record({ rewrite: fc.constantFrom('none', 'none', 'none', 'summary', 'clear'), text: fc.boolean(), at: fc.nat() })
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), fc.constantFrom('adaptive', 'enabled'), (steps, mode) => {
        const system = 'You are an agent.'
        const client: Message[] = [{ role: 'user', content: 'Do the task.' }]
        let anchor: { cut: number; summary: string; bound: number } | undefined
        const cleared = new Map<number, Message>()
        const clearings: Rewrite[] = []
        let lastRewrite = 0
        const forward = (): Message[] => {
          const own = unbindThinking(
            client.map((m, i) => cleared.get(i) ?? m),
            clearings
          ).messages
          if (!anchor) return own
          const tail = unbindThinking(own.slice(anchor.cut), [{ from: 0, bound: anchor.bound - anchor.cut }]).messages
          return [{ role: 'user', content: anchor.summary }, ...tail]
        }
        for (const [n, s] of steps.entries()) {
          // the gateway's rewrite at this request, where one happens
          const last = client.length - 1
          if (s.rewrite === 'summary' && client.length >= 4) {
            // a cut at an assistant message, after the current one
            const from = anchor?.cut ?? 1
            const cuts = client.map((_, i) => i).filter((i) => i > from && i < last && (client[i] as Message).role === 'assistant')
            if (cuts.length > 0) {
              anchor = { cut: cuts[s.at % cuts.length] as number, summary: `Summary ${n}`, bound: client.length }
              lastRewrite = client.length
            }
          } else if (s.rewrite === 'clear') {
            const results = client
              .map((_, i) => i)
              .filter((i) => i >= (anchor?.cut ?? 0) && i < last - 1 && !cleared.has(i) && firstBlock(client[i])?.type === 'tool_result')
            if (results.length > 0) {
              const i = results[s.at % results.length] as number
              // the placeholder keeps the call's id
              const id = String(firstBlock(client[i])?.tool_use_id)
              cleared.set(i, { role: 'user', content: [result(id, '[cleared]')] })
              clearings.push({ from: i, bound: client.length })
              lastRewrite = client.length
            }
          }
          const messages = forward()
          const asked = mode === 'enabled' && openLoopWithoutThinking(messages) ? 'disabled' : mode
          const body = { model: 'claude-opus-5-5', system, tools: [], thinking: { type: asked }, messages }
          const check = checkThinkingPrefix(body)
          expect(check.refusal).toBeUndefined()
          // every block produced since the last rewrite goes on
          const since = client
            .slice(lastRewrite)
            .flatMap((m) => (m.role === 'assistant' && Array.isArray(m.content) ? m.content.filter((b) => b.type === 'thinking') : []))
          const sent = messages.flatMap((m) => (m.role === 'assistant' && Array.isArray(m.content) ? m.content.filter((b) => b.type === 'thinking') : []))
          for (const b of since) expect(sent).toContainEqual(b)
          // the model answers, thinking first where asked, then the client appends it and its next turn
          const id = `t${n}`
          const content = [...(thinkingOn(body) ? [producedThinking(body)] : []), s.text ? { type: 'text', text: 'noted' } : call(id)]
          client.push({ role: 'assistant', content })
          client.push(s.text ? { role: 'user', content: 'go on' } : { role: 'user', content: [result(id)] })
        }
      }),
      { numRuns: 300 }
    )
  })
})
