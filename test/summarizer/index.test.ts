import { describe, expect, it } from 'vitest'
import { modelSummarizer } from '../../src/summarizer/index.js'
import { ResilientSummarizer } from '../../src/summarizer/resilient.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { CORE_REDACTORS, planCompaction } from '../../src/compaction/index.js'
import { shellStep, user } from '../helpers/history.js'

const plan = planCompaction({
  messages: [user('fix the flaky test'), ...Array.from({ length: 20 }, (_, i) => shellStep(`t${i}`, `npm test -- run ${i}`, 'y'.repeat(400))).flat()],
  mode: 'manual',
  budgetTokens: 2_000,
  sizingBudgetTokens: 2_000,
  keepTurns: 2,
  dryRun: false
})

const settings = {
  COMPACT_SUMMARIZER: 'auto' as const,
  COMPACT_MODEL: 'claude-test',
  COMPACT_SUMMARIZER_TIMEOUT_MS: 5_000,
  COMPACT_SUMMARIZER_INPUT_TOKENS: 50_000,
  COMPACT_FALLBACK: 'extractive' as const
}

describe('modelSummarizer', () => {
  it('builds no model summarizer without an API key', async () => {
    expect(await modelSummarizer(settings)).toBeUndefined()
    expect(await modelSummarizer({ ...settings, ANTHROPIC_API_KEY: '' })).toBeUndefined()
  })

  it('puts a given summarizer behind the fallback, key or no key', async () => {
    const s = await modelSummarizer(settings, new ExtractiveSummarizer())
    expect(s).toBeInstanceOf(ResilientSummarizer)
  })

  it('builds an Anthropic summarizer behind the fallback, which calls the base URL it is given', async () => {
    const fake = await new FakeAnthropic().start()
    try {
      fake.reply({ toolInput: { objective: 'from the fake model' } })
      const s = await modelSummarizer({ ...settings, ANTHROPIC_API_KEY: 'sk-test', ANTHROPIC_BASE_URL: fake.url })
      expect(s).toBeInstanceOf(ResilientSummarizer)
      const out = await s?.summarize({ redactors: CORE_REDACTORS, plan })
      expect(out?.sections?.objective).toBe('from the fake model')
      expect(out?.report).toMatchObject({ kind: 'anthropic', model: 'claude-test', calls: 1, fallback_reason: null })
      expect(fake.requests[0]?.headers.authorization).toBe('Bearer sk-test')
      expect(fake.requests[0]?.body.model).toBe('claude-test')
    } finally {
      await fake.close()
    }
  })
})
