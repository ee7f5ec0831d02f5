import { describe, expect, it } from 'vitest'
import { CORE_REDACTORS, emptySections, planCompaction } from '../../src/compaction/index.js'
import { FIXED_TOKENS, MAX_OUTPUT_TOKENS, MIN_OUTPUT_TOKENS, foldSummary, maxOutputTokens } from '../../src/summarizer/fold.js'
import { SummarizerFault } from '../../src/summarizer/faults.js'
import { shellStep, user } from '../helpers/history.js'

const plan = (steps: number) =>
  planCompaction({
    messages: [
      user('port the parser'),
      ...Array.from({ length: steps }, (_, i) => shellStep(`t${i}`, `cat src/p${i}.ts`, `// part ${i}\n${'x = 1\n'.repeat(600)}`)).flat(),
      user('now test it')
    ],
    mode: 'manual',
    budgetTokens: 'off',
    sizingBudgetTokens: 45_000,
    keepTurns: 1,
    dryRun: false
  })

describe('foldSummary', () => {
  it('folds a long span part by part, each call given the summary so far; the fold model first, the main model last', async () => {
    const seen: { model: string; prompt: string }[] = []
    const { sections, usage } = await foldSummary(
      { redactors: CORE_REDACTORS, plan: plan(60) },
      { inputBudgetTokens: 8_000, model: 'strong', foldModel: 'cheap' },
      async ({ prompt, model, usage }) => {
        usage.calls++
        seen.push({ model, prompt })
        return { ...emptySections(), objective: `after part ${seen.length}` }
      }
    )
    expect(seen.length).toBeGreaterThanOrEqual(3)
    expect(seen.map((s) => s.model)).toEqual([...Array(seen.length - 1).fill('cheap'), 'strong'])
    expect(seen[1]!.prompt).toContain('after part 1')
    expect(seen.at(-1)!.prompt).toContain(`Part ${seen.length} of ${seen.length}`)
    expect(sections?.objective).toBe(`after part ${seen.length}`)
    expect(usage.calls).toBe(seen.length)
    // each call's prompt within the input budget, with the room the doctrine and the tool take
    for (const s of seen) expect(s.prompt.length / 4).toBeLessThanOrEqual(8_000 - FIXED_TOKENS)
  })

  it('refuses an input budget with no room for the span, and sizes the output to the summary budget', async () => {
    await expect(
      foldSummary({ redactors: CORE_REDACTORS, plan: plan(3) }, { inputBudgetTokens: 2_000, model: 'm' }, async () => emptySections())
    ).rejects.toBeInstanceOf(SummarizerFault)
    expect(maxOutputTokens(100)).toBe(MIN_OUTPUT_TOKENS)
    expect(maxOutputTokens(3_000)).toBe(6_000)
    expect(maxOutputTokens(100_000)).toBe(MAX_OUTPUT_TOKENS)
  })
})
