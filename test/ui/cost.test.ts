import { describe, expect, it } from 'vitest'
import { describeCost } from '../../src/ui/cost.js'
import type { SessionCost } from '../../src/contract/reports.js'

const cost = (over: Partial<SessionCost>): SessionCost => ({
  session_id: 's-1',
  requests: 12,
  control: false,
  upstream: { input_tokens: 1_200, cache_creation_input_tokens: 30_000, cache_read_input_tokens: 400_000, output_tokens: 2_000 },
  tokens_kept_out: 0,
  kept_out_units: 0,
  summary_calls: 0,
  summary_input_tokens: 0,
  summary_output_tokens: 0,
  estimate: { billed_units: 88_700, uncompacted_units: 88_700, saved_units: 0, saved_share: 0 },
  ...over
})

describe("a session's cost in words", () => {
  it('says nothing of a session the proxy never answered', () => {
    expect(describeCost(cost({ requests: 0 }))).toBe('')
  })

  it('gives the upstream usage with plurals right, and says when compaction kept nothing out yet', () => {
    const text = describeCost(cost({ requests: 1, summary_calls: 1 }))
    expect(text).toContain('1 request,')
    expect(text).toContain('1 summary call.')
    expect(text).toContain('400,000 cache-read')
    expect(text).toContain('kept nothing out')
  })

  it('says what compaction saved, or what it cost, and how the estimate is made', () => {
    const saved = describeCost(
      cost({ tokens_kept_out: 500_000, estimate: { billed_units: 88_700, uncompacted_units: 138_700, saved_units: 50_000, saved_share: 0.36 } })
    )
    expect(saved).toContain('500,000 tokens out of its prompts: about 36% less than without compaction')
    expect(saved).toContain('reads at 0.1x')
    const cost_ = describeCost(
      cost({ tokens_kept_out: 1_000, estimate: { billed_units: 100_000, uncompacted_units: 90_000, saved_units: -10_000, saved_share: -0.111 } })
    )
    expect(cost_).toContain('about 11% more than without compaction')
  })
})
