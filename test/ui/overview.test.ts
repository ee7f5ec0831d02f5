import { describe, expect, it } from 'vitest'
import type { Overview } from '../../src/contract/reports.js'
import { describeMeasured, describeSavings, describeWriters, duration, headline, money, waitRows, writerParts } from '../../src/ui/overview.js'

const overview = (over: Partial<Overview> = {}): Overview => ({
  from: '2026-11-26T12:00:00.000Z',
  to: '2026-12-03T12:30:00.000Z',
  session_id: null,
  bucket: 'day',
  compactions: { total: 10, via_proxy: 8, via_compact_route: 2, tokens_before: 500_000, tokens_after: 180_000, tokens_removed: 320_000 },
  clearings: { count: 0, tool_results: 0, tokens_cleared: 0 },
  summaries: { model: 6, extractive_chosen: 1, fallback: 2, cache: 1, fallback_reasons: { timeout: 2 }, models: { 'claude-haiku-4-5': 6 } },
  crossings: {
    count: 8,
    mean_wait_ms: 1_503.4,
    max_wait_ms: 11_200,
    waits: [
      { up_to_ms: 10, count: 5 },
      { up_to_ms: 100, count: 1 },
      { up_to_ms: 1_000, count: 0 },
      { up_to_ms: 10_000, count: 1 },
      { up_to_ms: null, count: 1 }
    ]
  },
  requests: {
    count: 200,
    tokens_kept_out: 2_400_000,
    metered: 150,
    metered_tokens_kept_out: 2_000_000,
    metered_tokens_kept_out_cached: 1_900_000,
    upstream: { input_tokens: 10_000, cache_creation_input_tokens: 400_000, cache_read_input_tokens: 6_000_000, output_tokens: 90_000 }
  },
  summary_calls: { calls: 7, input_tokens: 300_000, output_tokens: 12_000 },
  measured: null,
  compaction_cache: { crossings: 0, crossing_read: 0, crossing_written: 0, invalidated: 0, after_requests: 0, after_read: 0, after_written: 0 },
  savings: {
    prices: { currency: 'USD', input: 3, output: 15, cache_write: 3.75, cache_read: 0.3 },
    billed: 6.54,
    without_compaction: 7.41,
    saved: 0.87,
    saved_share: 0.117
  },
  series: [],
  ...over
})

describe('the overview in words', () => {
  it('opens with tokens kept out, compactions, the crossing wait and the estimate, each with its line', () => {
    const cards = headline(overview())
    expect(cards.map((c) => [c.label, c.value])).toEqual([
      ['Tokens kept out of prompts', '2,400,000'],
      ['Compactions', '10'],
      ['Crossing wait', '1.5 s'],
      ['Saved (estimate)', '$0.87']
    ])
    expect(cards[0]!.note).toBe('over 200 proxied requests')
    expect(cards[1]!.note).toBe('8 by the proxies, 2 by POST /v1/compact; 320,000 tokens removed')
    expect(headline(overview({ clearings: { count: 3, tool_results: 14, tokens_cleared: 61_000 } }))[1]!.note).toBe(
      '8 by the proxies, 2 by POST /v1/compact; 320,000 tokens removed; 3 crossings answered by clearing 14 old tool results (61,000 tokens)'
    )
    expect(cards[2]!.note).toBe('mean of 8 crossings; longest 11 s')
    expect(cards[3]!.note).toBe('12% less than without compaction')
  })

  it('says plainly where there is nothing yet, and where compaction cost more than it saved', () => {
    const empty = headline(
      overview({
        compactions: { total: 0, via_proxy: 0, via_compact_route: 0, tokens_before: 0, tokens_after: 0, tokens_removed: 0 },
        crossings: { count: 0, mean_wait_ms: null, max_wait_ms: null, waits: [] },
        requests: {
          count: 0,
          tokens_kept_out: 0,
          metered: 0,
          metered_tokens_kept_out: 0,
          metered_tokens_kept_out_cached: 0,
          upstream: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 }
        }
      })
    )
    expect(empty.map((c) => c.value)).toEqual(['0', '0', '–', '–'])
    expect(empty.map((c) => c.note)).toEqual([
      'No request through the proxies yet.',
      'None in this range.',
      'No proxied request crossed its budget.',
      "Nothing metered: the estimate reads the usage in the proxies' answers."
    ])
    const costly = headline(overview({ savings: { ...overview().savings, saved: -0.004, saved_share: -0.02 } }))
    expect(costly[3]).toMatchObject({ value: '-$0.0040', note: '2% more than without compaction' })
  })

  it('names who wrote the summaries, the fallbacks with their reasons, as shares that add up', () => {
    expect(writerParts(overview()).map((p) => [p.key, p.count])).toEqual([
      ['model', 6],
      ['extractive', 1],
      ['fallback', 2],
      ['cache', 1]
    ])
    expect(describeWriters(overview())).toBe(
      'Of 10 summaries: 60% a model (claude-haiku-4-5); 10% extractive, chosen; 20% extractive, fallback (timeout 2); 10% the summary cache.'
    )
    expect(describeWriters(overview({ compactions: { ...overview().compactions, total: 0 } }))).toBe('No summaries were written in this range.')
  })

  it('reads the waits as buckets with their bounds', () => {
    expect(waitRows(overview())).toEqual([
      { bucket: 'up to 10 ms', count: 5 },
      { bucket: '10 ms – 100 ms', count: 1 },
      { bucket: '100 ms – 1.0 s', count: 0 },
      { bucket: '1.0 s – 10 s', count: 1 },
      { bucket: 'over 10 s', count: 1 }
    ])
    expect(duration(2.46)).toBe('2.5 ms')
    expect(duration(3)).toBe('3 ms')
  })

  it('says how the estimate is made, at the prices and in the currency configured', () => {
    const text = describeSavings(
      overview({ savings: { ...overview().savings, prices: { currency: 'EUR', input: 2, output: 10, cache_write: 2.5, cache_read: 0.2 } } })
    )
    expect(text).toContain('Billed: €6.54, for 150 metered requests (10,000 input, 400,000 cache-write, 6,000,000 cache-read and 90,000 output tokens')
    expect(text).toContain('7 summary calls (300,000 input, 12,000 output tokens)')
    expect(text).toContain(
      'Without compaction: €7.41, the same requests each also sending the 2,000,000 tokens compaction kept out of them (1,900,000 at the cache-read price'
    )
    expect(text).toContain('at €2.00 input, €10.00 output, €2.50 cache-write and €0.20 cache-read per million tokens')
    // a code Intl knows no symbol for is written as the code
    expect(money(1.5, 'XXQ')).toMatch(/^XXQ\s1\.50$/)
  })
})

describe('what the control group measured, in words', () => {
  const bins = [
    { from_tokens: 0, to_tokens: 25_000, treated: { requests: 90, units_per_request: 12_000 }, control: { requests: 10, units_per_request: 20_000 } }
  ]
  it('gives the measured share with its interval, and what it compared', () => {
    const o = overview({ measured: { treated_requests: 90, control_requests: 10, bins, saved_share: 0.4, interval: { low: 0.31, high: 0.49 } } })
    expect(describeMeasured(o)).toBe(
      'Measured: 40% less billed per request than without compaction (95% interval: 31% to 49% saved), over 90 requests of compacted conversations against 10 requests of the control group (COMPACT_CONTROL_SHARE, sent through uncompacted), compared between histories of similar length.'
    )
    expect(describeSavings(o)).toContain('Measured: 40% less')
  })

  it('says when it cannot compare yet, and nothing without a control group', () => {
    expect(describeMeasured(overview({ measured: { treated_requests: 5, control_requests: 1, bins, saved_share: 0.1, interval: null } }))).toContain(
      '(too few requests yet for an interval)'
    )
    expect(describeMeasured(overview({ measured: { treated_requests: 5, control_requests: 1, bins, saved_share: null, interval: null } }))).toContain(
      'no length of history has both yet'
    )
    expect(
      describeMeasured(overview({ measured: { treated_requests: 5, control_requests: 1, bins, saved_share: -0.05, interval: { low: -0.1, high: 0 } } }))
    ).toContain('5% more billed per request')
    expect(describeMeasured(overview())).toBe('')
  })
})
