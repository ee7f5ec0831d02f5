import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Block, CLEARED_INPUT, CLEARED_MARK, type Message, clearThinking, clearToolUses } from '../../src/compaction/index.js'
import { generatedHistories } from '../helpers/invariants.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

const note = (id: string): string => `recall "${id}"`
const blocks = (m: Message): Block[] => (typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content)
const useIds = (messages: readonly Message[]): string[] =>
  messages.flatMap((m) =>
    m.role === 'assistant'
      ? blocks(m)
          .filter((b) => b.type === 'tool_use')
          .map((b) => String(b.id))
      : []
  )
const resultIds = (messages: readonly Message[]): string[] =>
  messages.flatMap((m) =>
    blocks(m)
      .filter((b) => b.type === 'tool_result')
      .map((b) => String(b.tool_use_id))
  )

const options = fc.record({
  keep: fc.integer({ min: 0, max: 6 }),
  excludeTools: fc.subarray(['bash', 'Edit', 'Read', 'str_replace_editor', 'Write']),
  clearInputs: fc.oneof(fc.boolean(), fc.subarray(['bash', 'Write'])),
  clearAtLeast: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 200_000 })),
  enough: fc.option(fc.integer({ min: 1, max: 500_000 }), { nil: undefined })
})

describe('clearing tool results', () => {
  it('changes only the results (and inputs) it reports, keeps every pair, the newest and the excluded, and clears nothing twice', () => {
    fc.assert(
      fc.property(generatedHistories, options, (messages, o) => {
        const before = structuredClone(messages)
        const out = clearToolUses(messages, o, note)
        expect(messages).toEqual(before) // never mutated
        // the same messages, roles and blocks in the same places: every call keeps its result
        expect(out.messages.map((m) => [m.role, blocks(m).length])).toEqual(messages.map((m) => [m.role, blocks(m).length]))
        expect(useIds(out.messages)).toEqual(useIds(messages))
        expect(resultIds(out.messages)).toEqual(resultIds(messages))
        const results = new Set(out.cleared.map((c) => `${c.message}/${c.block}`))
        const inputs = new Set(out.cleared.filter((c) => c.inputCleared).map((c) => c.tool_use_id))
        messages.forEach((m, i) =>
          blocks(m).forEach((b, j) => {
            const now = blocks(out.messages[i]!)[j]!
            if (results.has(`${i}/${j}`)) {
              const { content: _c, ...rest } = b
              expect(now).toEqual({ ...rest, content: expect.stringMatching(/^\[tool result cleared/) })
              expect(String(now.content)).toContain(`recall "${String(b.tool_use_id)}"`)
            } else if (b.type === 'tool_use' && inputs.has(String(b.id))) {
              expect(now).toEqual({ ...b, input: CLEARED_INPUT })
            } else expect(now).toEqual(b)
          })
        )
        // the newest `keep` uses and the excluded tools' are never cleared; the sum is what each reports
        const order = useIds(messages)
        const kept = new Set(order.slice(Math.max(0, order.length - o.keep)))
        for (const c of out.cleared) {
          expect(kept.has(c.tool_use_id)).toBe(false)
          expect(o.excludeTools).not.toContain(c.name)
          expect(c.tokens).toBeGreaterThan(0)
        }
        expect(out.tokens).toBe(out.cleared.reduce((n, c) => n + c.tokens, 0))
        if (out.cleared.length > 0) expect(out.tokens).toBeGreaterThanOrEqual(o.clearAtLeast)
        // cleared once: a second pass finds none of them again
        const again = clearToolUses(out.messages, { ...o, clearAtLeast: 0 }, note)
        for (const c of again.cleared) expect(out.cleared.map((x) => x.tool_use_id)).not.toContain(c.tool_use_id)
      }),
      { numRuns: 30 }
    )
  }, 120_000)

  it('clears oldest first and stops once enough has gone; clears nothing when less than clear_at_least would go', () => {
    const messages: Message[] = [user('go')]
    for (let i = 0; i < 5; i++) messages.push(...shellStep(`t${i}`, `cmd ${i}`, 'o'.repeat(4_000)))
    const some = clearToolUses(messages, { keep: 0, excludeTools: [], clearInputs: false, clearAtLeast: 0, enough: 1_500 }, note)
    expect(some.cleared.map((c) => c.tool_use_id)).toEqual(['t0', 't1'])
    const none = clearToolUses(messages, { keep: 0, excludeTools: [], clearInputs: false, clearAtLeast: 100_000 }, note)
    expect(none.cleared).toEqual([])
    expect(none.messages).toEqual(messages)
    // a placeholder of an output with astral characters and NULs at its ends stays well-formed
    const odd = [user('go'), assistant(call('x', 'bash', { command: 'cat 😀' })), results(result('x', `\u0000😀${'e'.repeat(3_000)}😀\u0000`))]
    const cleared = clearToolUses(odd, { keep: 0, excludeTools: [], clearInputs: false, clearAtLeast: 0 }, note)
    const text = String((cleared.messages[2]!.content as Block[])[0]!.content)
    expect(text.startsWith(CLEARED_MARK)).toBe(true)
    expect(text).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/)
  })
})

describe('clearing thinking', () => {
  it('keeps the thinking of the newest turns only, every other block as it was, and never leaves a message empty', () => {
    fc.assert(
      fc.property(generatedHistories, fc.integer({ min: 1, max: 4 }), (messages, keep) => {
        const out = clearThinking(messages, keep)
        expect(out.messages).toHaveLength(messages.length)
        messages.forEach((m, i) => {
          const now = out.messages[i]!
          const others = blocks(m).filter((b) => b.type !== 'thinking' && b.type !== 'redacted_thinking')
          if (now === m) return
          expect(m.role).toBe('assistant')
          expect(blocks(now)).toEqual(others.length > 0 ? others : [{ type: 'text', text: '(thinking cleared)' }])
        })
        expect(clearThinking(messages, 'all').messages).toEqual(messages)
      }),
      { numRuns: 40 }
    )
  }, 120_000)
})
