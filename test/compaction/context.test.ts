import { describe, expect, it } from 'vitest'
import {
  type Block,
  type Message,
  carriedContext,
  finishCompaction,
  foreignSummary,
  isHarnessContext,
  planCompaction,
  readLedger,
  validateHistory
} from '../../src/compaction/index.js'
import { messagesApiRefusal } from '../helpers/messages-api-rules.js'
import { assistant, call, shellStep, user } from '../helpers/history.js'

const reminder = (text: string): Block => ({ type: 'text', text: `<system-reminder>\n${text}\n</system-reminder>` })
const environment = '# Environment\nYou have been invoked in the following environment:\n - Primary working directory: /repo\n - Platform: linux'
const rules = "As you answer the user's questions, you can use the following context:\n# claudeMd\nAlways run the linter before you commit."

/** A session as a harness sends it: setup context in the first prompt, a system message after it, then work. */
function session(steps: number, extra: Message[] = []): Message[] {
  const out: Message[] = [
    {
      role: 'user',
      content: [reminder(rules), reminder('The following skills are available: review, test'), { type: 'text', text: 'Add a --verbose flag to the CLI.' }]
    },
    { role: 'system', content: environment },
    assistant('I will look at the CLI first.')
  ]
  out.push(user('go on'))
  for (let i = 0; i < steps; i++) out.push(...shellStep(`t${i}`, `grep -n verbose src/cli${i}.ts`, `src/cli${i}.ts:${i}: ${'output '.repeat(200)}`))
  out.push(assistant('Done with the search.'), ...extra, user('now write the test'), assistant('Writing it.'))
  return out
}

const compact = (messages: Message[], budget: number, keepTokens?: number) =>
  finishCompaction(planCompaction({ messages, mode: 'manual', budgetTokens: budget, sizingBudgetTokens: budget, keepTurns: 1, keepTokens, dryRun: false }), {
    id: 'cmp_ctx'
  })

describe('harness context', () => {
  it('is a text wholly wrapped in one tag that names context, and nothing else', () => {
    expect(isHarnessContext('<system-reminder>\nbe brief\n</system-reminder>')).toBe(true)
    expect(isHarnessContext('  <environment_details>\ncwd: /x\n</environment_details>\n')).toBe(true)
    expect(isHarnessContext('<user-instructions attr="1">use tabs</user-instructions>')).toBe(true)
    expect(isHarnessContext('<system-reminder>a</system-reminder> and then my question')).toBe(false)
    expect(isHarnessContext('<system-reminder>a</system-reminder>\n<system-reminder>b</system-reminder>')).toBe(false)
    expect(isHarnessContext('<command-name>/hi</command-name>')).toBe(false)
    expect(isHarnessContext('<div>html the user pasted</div>')).toBe(false)
    expect(isHarnessContext('<compaction-summary id="c">x</compaction-summary>')).toBe(false)
  })
})

describe('a compaction of a session with setup context and system messages', () => {
  const messages = session(40)
  const out = compact(messages, 8_000)

  it("carries the span's system message and harness context into the compacted history verbatim", () => {
    expect(validateHistory(messages)).toBeUndefined()
    expect(out.compacted).toBe(true)
    expect(out.kept_from).toBeGreaterThan(2)
    const sent = out.messages
    const systems = sent.filter((m) => m.role === 'system')
    expect(systems).toHaveLength(1)
    expect(systems[0]!.content).toEqual([{ type: 'text', text: environment }])
    const first = sent[0]!.content as Block[]
    expect(first).toContainEqual(reminder(rules))
    expect(first).toContainEqual(reminder('The following skills are available: review, test'))
    expect(out.stats.carried_context_tokens).toBeGreaterThan(0)
    expect(out.stats.carried_context_dropped).toBe(0)
    expect(messagesApiRefusal({ model: 'm', max_tokens: 1, messages: sent })).toBeUndefined()
  })

  it("never takes it for the user's words: the requests are what the user asked, the summary does not restate it", () => {
    const ledger = readLedger(messages.slice(0, out.kept_from))
    expect(ledger.userRequests.map((r) => r.text)).toEqual(['Add a --verbose flag to the CLI.'])
    expect(ledger.acknowledgements).toEqual(['go on'])
    expect(out.summary.text).not.toContain('claudeMd')
    expect(out.summary.text).not.toContain('Primary working directory')
    expect(out.summary.sections.objective).toContain('--verbose')
  })

  it('counts it within the budget', () => {
    expect(out.stats.context_after_compaction).toBeLessThanOrEqual(8_000)
    const again = compact(messages, 8_000)
    expect(again.stats).toEqual(out.stats)
  })

  it('keeps the newest of each kind once, in the order the span had them', () => {
    const refreshed = session(40, [user('one more thing'), { role: 'system', content: `${environment}\n - Today: Tuesday` }, assistant('noted')])
    const later = compact(refreshed, 8_000)
    const systems = later.messages.filter((m) => m.role === 'system')
    expect(systems).toHaveLength(1)
    expect(systems[0]!.content).toEqual([{ type: 'text', text: `${environment}\n - Today: Tuesday` }])
  })

  it('is bounded: context past an eighth of the budget is left out whole, the oldest first, and counted', () => {
    const huge: Message[] = [
      { role: 'user', content: [reminder(`${rules}\n${'a rule to keep. '.repeat(2_000)}`), { type: 'text', text: 'Add a --verbose flag.' }] },
      { role: 'system', content: 'Be brief.' },
      ...session(40).slice(2)
    ]
    const bounded = compact(huge, 8_000)
    expect(bounded.stats.carried_context_dropped).toBe(1)
    expect(bounded.messages.filter((m) => m.role === 'system')[0]!.content).toEqual([{ type: 'text', text: 'Be brief.' }])
    expect(JSON.stringify(bounded.messages)).not.toContain('a rule to keep.')
    expect(bounded.stats.context_after_compaction).toBeLessThanOrEqual(8_000)
    const context = carriedContext(huge.slice(0, 2), 1_000, 1)
    expect(context.dropped).toBe(1)
    expect(context.system).toEqual([{ type: 'text', text: 'Be brief.' }])
  })

  it('merges carried system blocks in front of a kept system message, so no two stand in a row', () => {
    const withOwn = [
      ...session(40).slice(0, -3),
      user('now write the test'),
      { role: 'system', content: 'Tests go in test/.' } as Message,
      assistant('Writing it.')
    ]
    // a tail of the last turn alone: its prompt, the system message after it, the answer
    const merged = compact(withOwn, 8_000, 100)
    expect(merged.kept_from).toBe(withOwn.length - 3)
    const systems = merged.messages.filter((m) => m.role === 'system')
    expect(systems).toHaveLength(1)
    expect(systems[0]!.content).toEqual([
      { type: 'text', text: environment },
      { type: 'text', text: 'Tests go in test/.' }
    ])
    expect(messagesApiRefusal({ model: 'm', max_tokens: 1, messages: merged.messages })).toBeUndefined()
  })
})

describe("a history that opens with another agent's own compaction summary", () => {
  const summary = [
    '## Goal',
    'Add a --verbose flag to the CLI and document it.',
    '',
    '## Done so far',
    '- Found the argument parser in src/cli.ts',
    '- Wrote the flag, tests still failing: test_cli.py::test_verbose',
    '',
    '## Next',
    '- Fix the failing test, then update docs/usage.md',
    'x'.repeat(600)
  ].join('\n')
  const history: Message[] = [user('What did we do so far?'), assistant(summary), user('Continue with the failing test'), assistant('On it.'), user('go on')]
  for (let i = 0; i < 30; i++) history.push(...shellStep(`f${i}`, `pytest tests/test_cli_${i}.py`, `${'.'.repeat(1_500)} ok`))
  history.push(assistant('Tests pass.'), user('now the docs'), assistant('Writing docs.'))

  it('reads it as a prior summary: its question is no request, its text is carried verbatim and carried on by the next compaction', () => {
    const ledger = readLedger(history.slice(0, 10))
    expect(ledger.userRequests.map((r) => r.text)).toEqual(['Continue with the failing test'])
    expect(ledger.acknowledgements).toEqual(['go on'])
    const out = compact(history, 8_000)
    expect(out.summary.text).not.toContain('What did we do so far?')
    expect(out.summary.sections.objective).toContain('failing test')
    const carried = (out.messages[0]!.content as Block[]).map((b) => b.text as string).find((t) => t.includes('## Goal'))
    expect(carried).toContain(summary)
    // the next compaction of the compacted history (as a proxy sends it) carries it on
    const later = [...out.messages, user('and the changelog'), assistant('ok')]
    for (let i = 0; i < 30; i++) later.push(...shellStep(`g${i}`, `cat docs/part_${i}.md`, `${'d'.repeat(1_500)}`))
    later.push(assistant('Read them.'), user('finish'), assistant('Done.'))
    const again = compact(later, 8_000)
    expect(JSON.stringify(again.messages[0])).toContain('## Goal')
    expect(again.summary.sections.user_requests.join('\n')).not.toContain('## Goal')
  })

  it('is not a first answer to a long task, nor one that called tools', () => {
    expect(
      foreignSummary([user('Explain the architecture of this repository in detail, with one section per layer. '.repeat(6)), assistant(summary)])
    ).toBeUndefined()
    expect(foreignSummary([user('summary?'), assistant(summary, call('t1', 'bash', { command: 'ls' }))])).toBeUndefined()
    expect(foreignSummary([user('summary?'), assistant('just a short answer')])).toBeUndefined()
    expect(foreignSummary(history)).toEqual({ question: 0, summary: 1 })
  })
})
