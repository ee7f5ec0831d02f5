import { describe, expect, it } from 'vitest'
import { type Message, asksProviderCompaction, compactsByItself } from '../../src/compaction/index.js'
import { assistant, user } from '../helpers/history.js'

const item = (item_type: string): Message => ({ role: 'user', content: [{ type: 'client_item', item_type }] })

describe("a client's own compaction", () => {
  it('is told by the provider compaction it holds (Anthropic block or Responses item) or asks for, in any message', () => {
    expect(compactsByItself([user('a'), assistant('b')])).toBe(false)
    expect(compactsByItself([user('a'), { role: 'assistant', content: [{ type: 'compaction', content: 'opaque' }] }, user('c')])).toBe(true)
    expect(compactsByItself([item('compaction'), assistant('b'), user('c')])).toBe(true)
    expect(compactsByItself([user('a'), assistant('b'), item('compaction_trigger')])).toBe(true)
    // an item of another kind the gateway does not read is not one
    expect(compactsByItself([item('future_item_kind'), assistant('b')])).toBe(false)
  })

  it('asks the provider to compact only where its newest message carries the trigger', () => {
    expect(asksProviderCompaction([user('a'), assistant('b'), item('compaction_trigger')])).toBe(true)
    expect(asksProviderCompaction([item('compaction_trigger'), assistant('b'), user('c')])).toBe(false)
    expect(asksProviderCompaction([])).toBe(false)
  })
})
