import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/server/config.js'
import { runCompaction } from '../../src/service/compact.js'
import { DEFAULT_BUDGET_TOKENS } from '../../src/contract/defaults.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import { shellStep, user } from '../helpers/history.js'

describe('DEFAULT_BUDGET_TOKENS', () => {
  it('is the server’s budget when none is configured: 45000 tokens, as docs/configuration.md says', () => {
    expect(loadConfig({}).COMPACT_BUDGET).toBe(45_000)
  })

  it('sizes the tail of a manual compaction when auto compaction is off', async () => {
    const messages = [user('go'), ...Array.from({ length: 400 }, (_, i) => shellStep(`t${i}`, `step ${i}`, 'z'.repeat(1_200))).flat()]
    const deps = { defaults: { budgetTokens: 'off' as const, keepTurns: 1_000 }, extractive: new ExtractiveSummarizer(), newId: () => 'cmp_1', now: () => 0 }
    const run = await runCompaction({ messages, mode: 'manual' }, deps)
    if (!run.response.compacted) throw new Error('not compacted')
    // the tail is bounded by a third of the default budget
    expect(run.response.stats.kept_tokens).toBeLessThanOrEqual(DEFAULT_BUDGET_TOKENS / 3)
    expect(run.response.stats.kept_tokens).toBeGreaterThan(DEFAULT_BUDGET_TOKENS / 3 - 1_000)
  })
})
