import { describe, expect, it } from 'vitest'
import { type Message, asksProviderCompaction, compactsByItself, finishCompaction, newestOpaque, planCompaction } from '../../src/compaction/index.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

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

describe('what the client cannot read', () => {
  const big = (n: number) => 'x'.repeat(n)
  /** A session whose second assistant message is the provider's compaction, then `steps` tool steps of `chars` characters. */
  function session(chars: number, steps = 6): Message[] {
    const m: Message[] = [user('Port the parser'), assistant('Reading.'), user('go on')]
    m.push({
      role: 'assistant',
      content: [
        { type: 'compaction', content: 'OPAQUE-PROVIDER-SUMMARY' },
        { type: 'text', text: 'Compacted.' }
      ]
    })
    m.push(user('continue'))
    for (let i = 0; i < steps; i++) m.push(assistant(call(`t${i}`, 'bash', { command: `cat f${i}` })), results(result(`t${i}`, big(chars))))
    return m
  }

  it('is found at the newest message that holds it: a compaction block, redacted thinking, encrypted reasoning', () => {
    expect(newestOpaque([user('a'), assistant('b')])).toBe(-1)
    expect(newestOpaque(session(10))).toBe(3)
    expect(
      newestOpaque([
        user('a'),
        {
          role: 'assistant',
          content: [
            { type: 'redacted_thinking', data: 'E' },
            { type: 'text', text: 'b' }
          ]
        },
        user('c')
      ])
    ).toBe(1)
    expect(newestOpaque([{ role: 'assistant', content: [{ type: 'client_item', item_type: 'reasoning', opaque: true }] }])).toBe(0)
    // a reasoning item the client can read is not
    expect(newestOpaque([{ role: 'assistant', content: [{ type: 'client_item', item_type: 'reasoning' }] }])).toBe(-1)
  })

  it('is kept, with all after it: the cut falls at it at the latest, and the block goes on as it came', () => {
    const messages = session(4_000)
    const plan = planCompaction({ messages, mode: 'auto', budgetTokens: 5_000, sizingBudgetTokens: 5_000, keepTurns: 8, dryRun: false })
    expect(plan.reason).toBe('over_budget')
    expect(plan.cut.cut).toBeGreaterThan(0)
    expect(plan.cut.cut).toBeLessThanOrEqual(3)
    const out = finishCompaction(plan, { id: 'cmp_o' })
    expect(JSON.stringify(out.messages)).toContain(JSON.stringify(messages[3]))
    expect(out.stats.context_after_compaction).toBeLessThanOrEqual(5_000)
  })

  it('leaves the history alone, not refused, where keeping it is more than the bound holds', () => {
    // so many steps after it that even with every output clipped to a marker they pass the bound
    const messages = session(10, 400)
    const plan = planCompaction({ messages, mode: 'auto', budgetTokens: 5_000, sizingBudgetTokens: 5_000, keepTurns: 8, dryRun: false })
    expect(plan.problem).toBeUndefined()
    expect(plan.summarize).toBe(false)
    expect(plan.reason).toBe('nothing_to_compact')
  })
})
