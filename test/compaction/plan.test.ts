import { describe, expect, it } from 'vitest'
import { type Message, messageTokens, planCompaction, planCut, safeBoundaries, finishCompaction } from '../../src/compaction/index.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

const policy = (keepTokens: number, keepTurns = 8) => ({ keepTokens, keepTurns, scale: 1 })
const tokensOf = (m: Message[]) => messageTokens(m, 1)
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)

describe('safeBoundaries', () => {
  it('lists assistant and prompt messages, never a tool_result message', () => {
    const h = [user('go'), ...shellStep('a', 'ls', 'x'), assistant('done'), user('next')]
    expect(safeBoundaries(h)).toEqual([0, 1, 3, 4])
  })
})

describe('planCut', () => {
  it('one prompt then 120 tool steps keeps a tail within keep_tokens, and the prompt goes to the summary verbatim', () => {
    const ask = 'Please refactor the parser in src/parse.ts and keep the public API stable.'
    const h: Message[] = [user(ask)]
    for (let i = 0; i < 120; i++) h.push(...shellStep(`t${i}`, `grep -n foo src/file${i}.ts`, `src/file${i}.ts:${i}: ${'x'.repeat(3_000)}`))
    const keep = 15_000
    const plan = planCut(h, tokensOf(h), policy(keep))
    expect(plan.cut).toBeGreaterThan(0)
    expect(plan.tailTokens).toBeLessThanOrEqual(keep)
    expect(sum(tokensOf(plan.tail))).toBeLessThanOrEqual(keep)
    expect(h[plan.cut]!.role).toBe('assistant')

    const compaction = planCompaction({ messages: h, mode: 'auto', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false })
    const out = finishCompaction(compaction, { id: 'cmp_1' })
    expect(out.stats.kept_tokens).toBeLessThanOrEqual(15_000)
    expect(out.summary!.sections.user_requests).toContain(ask)
    expect(out.summary!.text).toContain(ask)
  })

  it('keeps at most keep_turns prompt messages and opens the tail at a turn', () => {
    const h: Message[] = []
    for (let i = 0; i < 12; i++) h.push(user(`request ${i}`), ...shellStep(`c${i}`, 'ls', 'ok'), assistant(`answer ${i}`))
    h.pop()
    h.push(assistant('answer 11'))
    const plan = planCut(h, tokensOf(h), policy(1_000_000, 3))
    expect(plan.tail.filter((m) => typeof m.content === 'string').length).toBe(3)
    expect(plan.tail[0]).toEqual(user('request 9'))
  })

  it('clips the largest tool_result of the newest step when it alone is over the bound, and reports it', () => {
    const huge = `${'line\n'.repeat(20_000)}Traceback: boom`
    const h = [user('run it'), assistant('ok'), user('again'), assistant(call('a', 'bash', { command: 'make' })), results(result('a', huge))]
    const plan = planCut(h, tokensOf(h), policy(2_000))
    expect(plan.cut).toBe(3)
    expect(plan.tailTokens).toBeLessThanOrEqual(2_000)
    expect(sum(tokensOf(plan.tail))).toBeLessThanOrEqual(2_000)
    expect(plan.clips).toEqual([
      {
        kind: 'tool_result',
        message_index: 4,
        block_index: 0,
        path: '/messages/4/content/0/content',
        tool_use_id: 'a',
        original_chars: huge.length,
        kept_chars: expect.any(Number)
      }
    ])
    const kept = (plan.tail[1]!.content as unknown as { content: string }[])[0]!.content
    expect(kept).toContain('characters clipped by compaction-gateway')
    expect(kept.endsWith('boom')).toBe(true)
    // the client's own history is not touched
    expect((h[4]!.content as unknown as { content: string }[])[0]!.content).toBe(huge)
  })

  it('shrinks the tail to the last turn in manual mode when everything fits', () => {
    const h = [user('first'), assistant('a'), user('second'), assistant('b')]
    const compaction = planCompaction({ messages: h, mode: 'manual', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false })
    expect(compaction.cut.cut).toBe(2)
    expect(compaction.reason).toBe('manual')
  })

  it('has nothing to compact in a single message', () => {
    const compaction = planCompaction({ messages: [user('hi')], mode: 'manual', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false })
    expect(compaction.reason).toBe('nothing_to_compact')
    expect(compaction.summarize).toBe(false)
  })

  it('tightens the tail so that the context after compaction fits the budget', () => {
    const h: Message[] = [user('go')]
    for (let i = 0; i < 60; i++) h.push(...shellStep(`s${i}`, 'cat big.txt', 'y'.repeat(2_000)))
    const system = 'S'.repeat(4 * 14_000) // 14k tokens of system prompt
    const compaction = planCompaction({ messages: h, system, mode: 'auto', budgetTokens: 20_000, sizingBudgetTokens: 20_000, keepTurns: 8, dryRun: false })
    expect(compaction.tailBound).toBe(20_000 - 14_000 - 2_000)
    const out = finishCompaction(compaction, { id: 'cmp_x' })
    expect(out.stats.context_after_compaction).toBeLessThanOrEqual(20_000)
  })

  it('does not compact under budget, or with the budget off', () => {
    const h = [user('a'), assistant('b'), user('c')]
    const base = { messages: h, mode: 'auto' as const, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false }
    expect(planCompaction({ ...base, budgetTokens: 45_000 }).reason).toBe('under_budget')
    expect(planCompaction({ ...base, budgetTokens: 'off' }).reason).toBe('disabled')
  })

  it('calibrates the estimate by the usage the client reports', () => {
    const h = [user('x'.repeat(4_000)), assistant('y'.repeat(4_000)), user('z')]
    const plain = planCompaction({ messages: h, mode: 'auto', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false })
    const scaled = planCompaction({
      messages: h,
      mode: 'auto',
      budgetTokens: 45_000,
      sizingBudgetTokens: 45_000,
      keepTurns: 8,
      dryRun: false,
      usageInputTokens: plain.rawHistoryTokens * 2
    })
    expect(scaled.scale).toBeCloseTo(2, 1)
    expect(scaled.rawHistoryTokens).toBeGreaterThan(plain.rawHistoryTokens * 1.9)
  })
})
