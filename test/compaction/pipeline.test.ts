import { describe, expect, it } from 'vitest'
import { type Message, finishCompaction, planCompaction, readLedger, safeBoundaries, validateHistory } from '../../src/compaction/index.js'
import { allTranscripts } from '../helpers/corpus.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

const manual = (messages: Message[], extra: Partial<Parameters<typeof planCompaction>[0]> = {}) =>
  finishCompaction(planCompaction({ messages, mode: 'manual', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false, ...extra }), {
    id: 'cmp_test'
  })

/** Seed 000's three tests, on every transcript at hand. */
describe.each(allTranscripts().map((t) => [t.name, t] as const))('the pipeline on %s', (_name, t) => {
  const out = manual(t.messages, { system: t.system })
  const span = t.messages.slice(0, out.kept_from)
  const ledger = readLedger(span)

  it("facts survive: the span's files and the newest request are in the summary", () => {
    expect(out.compacted).toBe(true)
    const text = out.summary!.text
    for (const f of ledger.filesModified) expect(text).toContain(f.path)
    for (const f of ledger.filesRead) expect(text).toContain(f)
    const newest = ledger.userRequests[ledger.userRequests.length - 1]
    if (newest) expect(text).toContain(newest.text.slice(0, 200).split('\n')[0]!)
  })

  it('never breaks tool_use/tool_result adjacency', () => {
    expect(validateHistory(out.messages!)).toBeUndefined()
  })

  it('cuts only at a safe boundary', () => {
    expect(safeBoundaries(t.messages)).toContain(out.kept_from)
    expect(out.kept_from).toBeGreaterThan(0)
  })
})

describe('facts survive a compaction', () => {
  it('keeps paths, errors and every request of a small span', () => {
    const h: Message[] = [
      user('Add retries to the HTTP client in src/http/client.ts'),
      ...shellStep('1', "sed -i 's/retries = 0/retries = 3/' src/http/client.ts", '<returncode>0</returncode>'),
      ...shellStep(
        '2',
        'npm test',
        '<returncode>1</returncode>\nFAIL test/client.test.ts\n  ● retries › gives up after 3\n    TypeError: fetchWithRetry is not a function'
      ),
      assistant('The test fails; fetchWithRetry is missing.'),
      user('Also log each retry at debug level.'),
      assistant(call('3', 'Read', { file_path: 'src/log.ts' })),
      results(result('3', 'export const log = pino()')),
      assistant('Done reading.'),
      user('What next?')
    ]
    const out = manual(h, { keepTurns: 1 })
    const text = out.summary!.text
    expect(text).toContain('src/http/client.ts')
    expect(text).toContain('src/log.ts')
    expect(text).toContain('TypeError: fetchWithRetry is not a function')
    expect(text).toContain('Add retries to the HTTP client in src/http/client.ts')
    expect(text).toContain('Also log each retry at debug level.')
    // The tail opens with the user's prompt, so the summary is put before its own words.
    expect(out.messages).toHaveLength(1)
    expect(out.messages![0]!.content.slice(-1)).toEqual([{ type: 'text', text: 'What next?' }])
  })

  it("a second compaction keeps the first one's files and nests no summaries", () => {
    const first: Message[] = [
      user('Fix the login bug'),
      ...shellStep('1', 'echo fix > src/auth/login.ts', 'ok'),
      assistant('fixed'),
      user('now the logout bug')
    ]
    const round1 = manual(first)
    const next: Message[] = [
      ...round1.messages!,
      assistant(call('2', 'Edit', { file_path: 'src/auth/logout.ts' })),
      results(result('2', 'ok')),
      assistant('done'),
      user('thanks, anything else?')
    ]
    const round2 = manual(next)
    const text = round2.summary!.text
    expect(text).toContain('src/auth/login.ts')
    expect(text).toContain('src/auth/logout.ts')
    expect(text).toContain('Fix the login bug')
    expect(text.match(/<compaction-summary/g)).toHaveLength(1)
    const all = JSON.stringify(round2.messages)
    expect(all.match(/<compaction-summary/g)).toHaveLength(1)
    expect(text).toMatch(/compacted_turns="2"/)
  })
})

describe('the hard bound under the calibration', () => {
  it('holds with a tiny budget and a provider count far above the estimate: the summary is reserved as the calibration will measure it', () => {
    const messages: Message[] = [user('Port the scheduler to asyncio')]
    for (let i = 0; i < 12; i++) messages.push(...shellStep(`c${i}`, `sed -n 1,40p src/sched_${i}.py`, `line ${i}: ${'y'.repeat(300)}`))
    messages.push(assistant('Read them.'), user('go on'))
    for (const usage of [50_000, 12_000, 5_000]) {
      const plan = planCompaction({
        messages,
        mode: 'auto',
        budgetTokens: 2_000,
        sizingBudgetTokens: 2_000,
        keepTurns: 8,
        usageInputTokens: usage,
        dryRun: false
      })
      if (plan.problem) continue // refused, naming the step: the bound is never broken
      const out = finishCompaction(plan, { id: 'cmp_cal' })
      expect(out.stats.context_after_compaction, `usage ${usage}`).toBeLessThanOrEqual(2_000)
    }
  })
})

describe("the user's words claim the summary's room first", () => {
  it('a session whose requests pass half the summary’s tenth keeps every one verbatim, the summary growing to at most a fifth', () => {
    // 30 requests of ~800 characters: some 6,000 tokens, more than a tenth of 45,000 holds with the rest
    // each its own words (text three requests share is the harness's, not the user's), from a seeded generator
    const words =
      'parser importer ledger invoice tariff export column dialect locale rounding currency archive schema webhook retry cursor header footer margin padding border shadow token session budget quota'.split(
        ' '
      )
    let seed = 7
    const pick = (): string => words[(seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) % words.length]!
    const asks = Array.from(
      { length: 30 },
      (_, k) =>
        `Request ${k}: ${Array.from({ length: 9 }, () => `make the ${pick()} handle the ${pick()} of ${pick()} without touching the ${pick()} or the ${pick()}.`).join(' ')}`
    )
    const messages: Message[] = []
    asks.forEach((ask, k) =>
      messages.push(user(ask), ...shellStep(`t${k}`, `npm test -- importer ${k}`, `ok ${'.'.repeat(8_000)}`), assistant(`Done with ${k}.`))
    )
    messages.push(user('Now the docs.'))
    const plan = planCompaction({ messages, mode: 'auto', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 8, dryRun: false })
    expect(plan.summaryMaxTokens).toBeGreaterThan(4_500)
    expect(plan.summaryMaxTokens).toBeLessThanOrEqual(9_000)
    const out = finishCompaction(plan, { id: 'cmp_words' })
    if (!out.compacted) throw new Error('not compacted')
    for (const ask of asks.slice(0, plan.ledger.userRequests.length)) expect(out.summary.text).toContain(ask)
    expect(out.stats.context_after_compaction).toBeLessThanOrEqual(45_000)
  })
})
