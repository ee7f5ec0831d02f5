import { describe, expect, it } from 'vitest'
import { type Anchor, hashPrefix, holds, withAnchor } from '../../src/proxy/anchors.js'
import { assistant, user } from '../helpers/history.js'

const history = [user('task'), assistant('step one'), user('go on'), assistant('step two'), user('and now?')]
const blocks = [
  { type: 'text' as const, text: '<summary>the first turns</summary>' },
  { type: 'text' as const, text: 'note' }
]

describe('anchors', () => {
  it('hold while the client still sends the messages they replace, and not once one of them changed', () => {
    const anchor: Anchor = { cut: 2, prefixHash: hashPrefix(history, 2), blocks, summaryId: 'cmp_1' }
    expect(holds(anchor, history)).toBe(true)
    expect(holds(anchor, [...history, assistant('more')])).toBe(true)
    expect(holds(anchor, [user('task, edited'), ...history.slice(1)])).toBe(false)
    expect(holds(anchor, history.slice(0, 2))).toBe(false) // nothing left after the summarized part
    expect(holds(undefined, history)).toBe(false)
  })

  it('put the summary in front of the first kept message when it is a user message, in its own message otherwise', () => {
    const atUser: Anchor = { cut: 2, prefixHash: hashPrefix(history, 2), blocks, summaryId: 'cmp_1' }
    expect(withAnchor(atUser, history)).toEqual([{ role: 'user', content: [...blocks, { type: 'text', text: 'go on' }] }, ...history.slice(3)])
    const atAssistant: Anchor = { cut: 1, prefixHash: hashPrefix(history, 1), blocks, summaryId: 'cmp_1' }
    expect(withAnchor(atAssistant, history)).toEqual([{ role: 'user', content: blocks }, ...history.slice(1)])
  })

  it('hash one message at a time, so that a message boundary moved is a different prefix', () => {
    expect(hashPrefix([user('ab'), user('c')], 2)).not.toBe(hashPrefix([user('a'), user('bc')], 2))
    expect(hashPrefix(history, 0)).toBe(hashPrefix([], 0))
  })
})
