import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { PostgresStore } from '../../src/storage/postgres.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import type { Store } from '../../src/storage/store.js'
import { Activity, type CompactionEvent, HOUR_MS, savingsAt } from '../../src/service/activity.js'
import { tempDb } from '../helpers/process.js'
import { dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

const usage = (input: number, write: number, read: number, output: number) => ({
  input_tokens: input,
  cache_creation_input_tokens: write,
  cache_read_input_tokens: read,
  output_tokens: output
})

/** A compaction's answer as the tallies read it: its prompt before and after, and who wrote its summary. */
function compacted(before: number, after: number, kind: string, model: string | null, fallback: string | null): CompactionEvent['response'] {
  return {
    compacted: true,
    stats: { raw_history_tokens: before, context_after_compaction: after },
    summarizer: { kind, model, fallback_reason: fallback, input_tokens: 0, output_tokens: 0, calls: 0, duration_ms: 0 }
  } as unknown as CompactionEvent['response']
}

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})
afterAll(async () => {
  if (!pgMissing) await dropSchemas()
})

const backends: { name: string; missing: string | undefined; open: () => Store }[] = [
  { name: 'SQLite', missing: undefined, open: () => new SqliteStore(tempDb()) },
  { name: 'PostgreSQL', missing: pgMissing, open: () => new PostgresStore(freshPgUrl()) }
]

const T0 = Date.UTC(2026, 11, 1, 10, 0, 0)

for (const backend of backends) {
  describe.skipIf(backend.missing !== undefined)(
    `what the gateway did, tallied on ${backend.name}${backend.missing ? ` (skipped: ${backend.missing})` : ''}`,
    () => {
      it("sums a session's cost across flushes and replicas, reads what is not written yet, and keeps tenants apart", async () => {
        const store = backend.open()
        opened.push(store)
        const errors: unknown[] = []
        const one = new Activity(
          store,
          (err) => errors.push(err),
          () => T0
        )
        const two = new Activity(
          store,
          (err) => errors.push(err),
          () => T0 + 5 * HOUR_MS
        )
        opened.push(one, two)
        one.request('acme', 's1', { keptOut: 0, metered: true, usage: usage(10, 1_000, 0, 50) })
        one.request('acme', 's1', { keptOut: 5_000, metered: true, usage: usage(12, 200, 1_000, 40) })
        one.request('acme', 's1', { keptOut: 0, metered: true }) // an answer that said nothing of its cost
        one.request('acme', 's1', { keptOut: 100, metered: true, usage: usage(0, 0, 0, 0) }) // read nothing from the cache: its kept-out tokens at the input price
        one.request('acme', 's1', { keptOut: 700, metered: false }) // an OpenAI request: kept out, not metered
        one.summary('acme', 's1', { calls: 1, input_tokens: 3_000, output_tokens: 400 })
        one.request('other', 's1', { keptOut: 0, metered: true, usage: usage(1, 1, 1, 1) }) // another key's session of the same name
        // the kept-out tokens of a request that read from the cache would have been reads too: 5,000 x 0.1 + 100
        expect(await one.sessionCost('acme', 's1')).toEqual({
          requests: 4,
          upstream: usage(22, 1_200, 1_000, 90),
          tokens_kept_out: 5_100,
          kept_out_units: 600,
          summary_calls: 1,
          summary_input_tokens: 3_000,
          summary_output_tokens: 400
        })
        two.request('acme', 's1', { keptOut: 0, metered: true, usage: usage(1, 0, 2_000, 10) })
        expect(await two.sessionCost('acme', 's1')).toMatchObject({ requests: 5, upstream: usage(23, 1_200, 3_000, 100) })
        expect((await two.sessionCost('other', 's1')).requests).toBe(1)
        const total = await one.figures('acme', null, { fromMs: T0, toMs: T0 + 6 * HOUR_MS }, HOUR_MS)
        expect(total.requests).toMatchObject({
          count: 6,
          metered: 5,
          tokens_kept_out: 5_800,
          metered_tokens_kept_out: 5_100,
          metered_tokens_kept_out_cached: 5_000
        })
        expect(total.series.map((p) => p.tokens_kept_out)).toEqual([5_800, 0, 0, 0, 0, 0])
        expect(errors).toEqual([])
      })

      it('tells who wrote the summaries, how long crossings waited, and reads only the range asked for', async () => {
        const store = backend.open()
        opened.push(store)
        let now = T0 + 60_000
        const activity = new Activity(
          store,
          () => undefined,
          () => now
        )
        opened.push(activity)
        activity.compaction('acme', 's1', { via: 'proxy', response: compacted(50_000, 20_000, 'anthropic', 'claude-haiku-4-5', null), waitMs: 3 })
        activity.compaction('acme', 's1', { via: 'proxy', response: compacted(48_000, 21_000, 'extractive', null, 'timeout'), waitMs: 30_500 })
        activity.compaction('acme', 's2', { via: 'route', response: compacted(10_000, 4_000, 'extractive', null, 'no_api_key') })
        now = T0 + 2 * HOUR_MS + 1
        activity.compaction('acme', undefined, { via: 'proxy', response: compacted(9_000, 3_000, 'cache', 'claude-haiku-4-5', null), waitMs: 120 })
        activity.compaction('acme', 's1', { via: 'route', response: compacted(7_000, 2_000, 'extractive', null, null) })
        now = T0 + 30 * HOUR_MS // outside the range read below
        activity.compaction('acme', 's1', { via: 'proxy', response: compacted(1, 1, 'anthropic', 'x', null), waitMs: 99_999 })

        const f = await activity.figures('acme', null, { fromMs: T0, toMs: T0 + 3 * HOUR_MS }, HOUR_MS)
        expect(f.compactions).toEqual({ total: 5, via_proxy: 3, via_compact_route: 2, tokens_before: 124_000, tokens_after: 50_000, tokens_removed: 74_000 })
        expect(f.summaries).toEqual({
          model: 1,
          extractive_chosen: 2,
          fallback: 1,
          cache: 1,
          fallback_reasons: { timeout: 1 },
          models: { 'claude-haiku-4-5': 1 }
        })
        expect(f.crossings).toEqual({
          count: 3,
          mean_wait_ms: 10_207.7,
          max_wait_ms: 30_500,
          waits: [
            { up_to_ms: 10, count: 1 },
            { up_to_ms: 100, count: 0 },
            { up_to_ms: 1_000, count: 1 },
            { up_to_ms: 10_000, count: 0 },
            { up_to_ms: null, count: 1 }
          ]
        })
        expect(f.series.map((p) => [p.compactions, p.tokens_removed, p.crossings])).toEqual([
          [3, 63_000, 2],
          [0, 0, 0],
          [2, 11_000, 1]
        ])
        // one session's own: the crossing of a conversation without one is the tenant's only
        const s1 = await activity.figures('acme', 's1', { fromMs: T0, toMs: T0 + 3 * HOUR_MS }, HOUR_MS)
        expect(s1.compactions.total).toBe(3)
        expect(s1.crossings.count).toBe(2)
        expect((await activity.figures('other', null, { fromMs: T0, toMs: T0 + 3 * HOUR_MS }, HOUR_MS)).compactions.total).toBe(0)
      })

      it("deletes a session's tallies with it (the key's totals keep their numbers), and prunes hours past retention", async () => {
        const store = backend.open()
        opened.push(store)
        let now = T0
        const activity = new Activity(
          store,
          () => undefined,
          () => now
        )
        opened.push(activity)
        activity.request('acme', 'gone', { keptOut: 10, metered: true, usage: usage(1, 2, 3, 4) })
        await activity.flush()
        expect((await activity.sessionCost('acme', 'gone')).requests).toBe(1)
        activity.request('acme', 'gone', { keptOut: 10, metered: true, usage: usage(1, 2, 3, 4) }) // not written yet when the session is deleted
        await activity.forget('acme', 'gone')
        await store.deleteSession('gone', 'acme')
        expect((await activity.sessionCost('acme', 'gone')).requests).toBe(0)
        const range = { fromMs: T0, toMs: T0 + HOUR_MS }
        expect((await activity.figures('acme', null, range, HOUR_MS)).requests.count).toBe(2)
        now = T0 + 3 * HOUR_MS
        activity.request('acme', 'kept', { keptOut: 0, metered: false })
        await activity.flush()
        await store.prune(T0 + HOUR_MS, now)
        expect((await activity.figures('acme', null, range, HOUR_MS)).requests.count).toBe(0)
        expect((await activity.figures('acme', null, { fromMs: T0, toMs: now + HOUR_MS }, HOUR_MS)).requests.count).toBe(1)
      })
    }
  )
}

describe('the estimate', () => {
  it('prices the overview at the prices configured, per million tokens', () => {
    const prices = { currency: 'USD', input: 3, output: 15, cache_write: 3.75, cache_read: 0.3 }
    const figures = {
      requests: {
        count: 3,
        tokens_kept_out: 900_000,
        metered: 2,
        metered_tokens_kept_out: 600_000,
        metered_tokens_kept_out_cached: 500_000,
        upstream: usage(100_000, 200_000, 1_000_000, 10_000)
      },
      summary_calls: { calls: 1, input_tokens: 50_000, output_tokens: 2_000 }
    }
    // requests: 0.3 + 0.75 + 0.3 + 0.15 = 1.5; summary: 0.15 + 0.03; kept out: 500k at 0.3 + 100k at 3 = 0.15 + 0.3
    expect(savingsAt(figures, prices)).toEqual({ prices, billed: 1.68, without_compaction: 1.95, saved: 0.27, saved_share: 0.138 })
    expect(
      savingsAt(
        { ...figures, requests: { ...figures.requests, upstream: usage(0, 0, 0, 0), metered_tokens_kept_out: 0, metered_tokens_kept_out_cached: 0 } },
        prices
      ).saved_share
    ).toBeNull()
  })
})
