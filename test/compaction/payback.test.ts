import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type CrossingCase, crossingCall, requestsOf } from '../../src/compaction/payback.js'

const PRICES = { cache_write: 1.25, cache_read: 0.1 }
const base: CrossingCase = {
  tokens: 20_000,
  limit: 100_000,
  keptTokens: 10_000,
  requestsSoFar: 5,
  growth: 1_000,
  intervalMs: 10_000,
  cacheMs: 300_000,
  prices: PRICES
}

/**
 * What the conversation is billed for its prompt over this request and `more` after it, none of them adding
 * tokens, the cache warm throughout: compacted now (the kept prompt written once, then read on each request
 * after) or not (the whole prompt read on each).
 */
function billed(c: CrossingCase, more: number, compacted: boolean): number {
  return compacted ? c.prices.cache_write * c.keptTokens + more * c.prices.cache_read * c.keptTokens : (more + 1) * c.prices.cache_read * c.tokens
}

describe('whether a crossing pays back (COMPACT_LIMIT)', () => {
  it('waits in a conversation too young to pay the rewrite back, and compacts once it has run long enough', () => {
    // the rewrite: 10,000 tokens written at 1.25 where they would be read at 0.1 (11,500); each request after saves 10,000 read at 0.1 (1,000)
    expect(crossingCall({ ...base, requestsSoFar: 5 })).toEqual({ kind: 'wait', paysBackAfter: 11, expectedRequests: 5 })
    expect(crossingCall({ ...base, requestsSoFar: 10 })).toMatchObject({ kind: 'wait' })
    expect(crossingCall({ ...base, requestsSoFar: 11 })).toEqual({ kind: 'compact', because: 'pays_back' })
    // further over the budget, more is saved a request: it pays back sooner
    expect(crossingCall({ ...base, tokens: 40_000, requestsSoFar: 5 })).toEqual({ kind: 'compact', because: 'pays_back' })
  })

  it('never waits past the limit, nor where the conversation will reach it first, nor where the cache goes cold between requests', () => {
    expect(crossingCall({ ...base, tokens: 100_001, limit: 100_000, requestsSoFar: 1 })).toEqual({ kind: 'compact', because: 'over_limit' })
    // 4 requests of 20,000 reach the limit; 5 are expected
    expect(crossingCall({ ...base, growth: 20_000 })).toEqual({ kind: 'compact', because: 'reaches_limit' })
    expect(crossingCall({ ...base, intervalMs: 301_000 })).toEqual({ kind: 'compact', because: 'cache_cold' })
    // a pace not seen yet: no requests to the limit known, the rest decides
    const { growth: _g, intervalMs: _i, ...unseen } = base
    expect(crossingCall(unseen)).toMatchObject({ kind: 'wait' })
  })

  it('compacts where the cache costs nothing more to write (nothing to pay back)', () => {
    expect(crossingCall({ ...base, prices: { cache_write: 0.1, cache_read: 0.1 } })).toEqual({ kind: 'compact', because: 'pays_back' })
  })

  it('reads the requests a history took from its messages: a model turn and its answer each', () => {
    expect(requestsOf(1)).toBe(1)
    expect(requestsOf(2)).toBe(1)
    expect(requestsOf(41)).toBe(20)
  })

  const cases = fc.record({
    tokens: fc.integer({ min: 1_001, max: 2_000_000 }),
    keptShare: fc.double({ min: 0.01, max: 0.99, noNaN: true }),
    limitOver: fc.integer({ min: -1_000, max: 2_000_000 }),
    requestsSoFar: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 5_000 })),
    growth: fc.option(fc.integer({ min: -5_000, max: 100_000 }), { nil: undefined }),
    intervalMs: fc.option(fc.integer({ min: 0, max: 3_600_000 }), { nil: undefined }),
    write: fc.double({ min: 0, max: 5, noNaN: true }),
    read: fc.double({ min: 0, max: 1, noNaN: true })
  })

  it('holds the limit, and a wait is one the bill worked out request by request agrees with (property)', () => {
    let waits = 0
    fc.assert(
      fc.property(cases, (g) => {
        const c: CrossingCase = {
          tokens: g.tokens,
          keptTokens: Math.floor(g.tokens * g.keptShare),
          limit: g.tokens + g.limitOver,
          requestsSoFar: g.requestsSoFar,
          ...(g.growth !== undefined ? { growth: g.growth } : {}),
          ...(g.intervalMs !== undefined ? { intervalMs: g.intervalMs } : {}),
          cacheMs: 300_000,
          prices: { cache_write: g.write, cache_read: g.read }
        }
        const call = crossingCall(c)
        if (c.tokens > c.limit) expect(call).toEqual({ kind: 'compact', because: 'over_limit' })
        if (call.kind !== 'wait') return
        waits++
        // a wait: the cache is warm, the conversation is not expected to reach the limit, and compacting now
        // would cost more than it saves over the requests it is expected to make
        expect(c.tokens).toBeLessThanOrEqual(c.limit)
        expect(c.intervalMs === undefined || c.intervalMs <= c.cacheMs).toBe(true)
        expect(billed(c, call.expectedRequests, true)).toBeGreaterThan(billed(c, call.expectedRequests, false))
        // and by the requests it says, it would have paid back
        expect(billed(c, call.paysBackAfter, true)).toBeLessThanOrEqual(billed(c, call.paysBackAfter, false) * (1 + 1e-9))
        // the same conversation, having run as long as that, compacts
        expect(crossingCall({ ...c, requestsSoFar: call.paysBackAfter }).kind).toBe('compact')
      }),
      { numRuns: 2_000 }
    )
    // the runs reached the waits the property is about
    expect(waits).toBeGreaterThan(50)
  })
})
