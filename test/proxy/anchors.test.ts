import { describe, expect, it } from 'vitest'
import { type Anchor, hashPrefix, holds, withAnchor } from '../../src/proxy/anchors.js'
import type { Message } from '../../src/compaction/index.js'
import { assistant, user } from '../helpers/history.js'

const history = [user('task'), assistant('step one'), user('go on'), assistant('step two'), user('and now?')]
const blocks = [
  { type: 'text' as const, text: '<summary>the first turns</summary>' },
  { type: 'text' as const, text: 'note' }
]
const head = { user: blocks, system: [] }

describe('anchors', () => {
  it('hold while the client still sends the messages they replace, and not once one of them changed', () => {
    const anchor: Anchor = { cut: 2, prefixHash: hashPrefix(history, 2), head, summaryId: 'cmp_1' }
    expect(holds(anchor, history)).toBe(true)
    expect(holds(anchor, [...history, assistant('more')])).toBe(true)
    expect(holds(anchor, [user('task, edited'), ...history.slice(1)])).toBe(false)
    expect(holds(anchor, history.slice(0, 2))).toBe(false) // nothing left after the summarized part
    expect(holds(undefined, history)).toBe(false)
  })

  it('put the summary in front of the first kept message when it is a user message, in its own message otherwise', () => {
    const atUser: Anchor = { cut: 2, prefixHash: hashPrefix(history, 2), head, summaryId: 'cmp_1' }
    expect(withAnchor(atUser, history)).toEqual([{ role: 'user', content: [...blocks, { type: 'text', text: 'go on' }] }, ...history.slice(3)])
    const atAssistant: Anchor = { cut: 1, prefixHash: hashPrefix(history, 1), head, summaryId: 'cmp_1' }
    expect(withAnchor(atAssistant, history)).toEqual([{ role: 'user', content: blocks }, ...history.slice(1)])
  })

  it('hash one message at a time, so that a message boundary moved is a different prefix', () => {
    expect(hashPrefix([user('ab'), user('c')], 2)).not.toBe(hashPrefix([user('a'), user('bc')], 2))
    expect(hashPrefix(history, 0)).toBe(hashPrefix([], 0))
  })

  it('match the summarized turns by their structure: tool output rewritten in place still holds, another call or prompt does not', () => {
    const call = (id: string): Message => ({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'read', input: { path: 'a.ts' } }] })
    const result = (id: string, text: string): Message => ({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: text }] })
    const original = [user('fix the bug'), call('t1'), result('t1', 'x'.repeat(5_000)), assistant('found it'), user('now test it')]
    const anchor: Anchor = { cut: 4, prefixHash: hashPrefix(original, 4), head, summaryId: 'cmp_1' }
    const pruned = [user('fix the bug'), call('t1'), result('t1', '[Old tool result content cleared]'), assistant('found it'), user('now test it')]
    expect(holds(anchor, pruned)).toBe(true)
    expect(holds(anchor, [user('fix the bug'), call('t2'), result('t2', 'x'), assistant('found it'), user('now test it')])).toBe(false)
    expect(holds(anchor, [user('fix another bug'), ...original.slice(1)])).toBe(false)
    expect(holds(anchor, [user('fix the bug'), assistant('found it'), user('x'), assistant('y'), user('now test it')])).toBe(false)
  })
})
