import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { Activity } from '../../src/service/activity.js'
import { costEstimate, legacyCost } from '../../src/service/costs.js'
import { tempDb } from '../helpers/process.js'

const usage = (input: number, write: number, read: number, output: number) => ({
  input_tokens: input,
  cache_creation_input_tokens: write,
  cache_read_input_tokens: read,
  output_tokens: output
})

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

describe("a session's cost estimate", () => {
  it('bills cache writes at 1.25x, reads at 0.1x and output at 5x, the summaries uncached, and credits what was kept out at its price', () => {
    const cost = {
      requests: 2,
      upstream: usage(100, 1_000, 10_000, 20),
      tokens_kept_out: 50_000,
      kept_out_units: 5_000,
      summary_calls: 1,
      summary_input_tokens: 2_000,
      summary_output_tokens: 100
    }
    // 100 + 1,250 + 1,000 + 100 = 2,450 for the requests; 2,000 + 500 for the summary
    expect(costEstimate(cost)).toEqual({ billed_units: 4_950, uncompacted_units: 2_450 + 5_000, saved_units: 2_500, saved_share: 0.336 })
    expect(costEstimate({ ...cost, tokens_kept_out: 0, kept_out_units: 0 }).saved_units).toBe(-2_500)
  })
})

describe('a cost kept by an earlier version', () => {
  it("goes on in the session's cost: its row (kept in the state, as that version wrote it) is added to the tallies", async () => {
    const store = new SqliteStore(tempDb())
    opened.push(store)
    const now = Date.UTC(2026, 11, 1)
    const earlier = {
      requests: 3,
      upstream: usage(30, 300, 3_000, 90),
      tokens_kept_out: 900,
      kept_out_units: 90,
      summary_calls: 1,
      summary_input_tokens: 10,
      summary_output_tokens: 5
    }
    const row = `cost:${createHash('sha256').update('acme\u0000s1').digest('hex')}`
    await store.putState(row, earlier, now + 86_400_000, { key_name: 'acme', session_id: 's1' })
    expect(await legacyCost(store, 'acme', 's1', now)).toEqual(earlier)
    expect(await legacyCost(store, 'acme', 's2', now)).toBeUndefined()
    const activity = new Activity(
      store,
      () => undefined,
      () => now
    )
    opened.push(activity)
    activity.request('acme', 's1', { keptOut: 100, metered: true, usage: usage(1, 0, 10, 1) })
    expect(await activity.sessionCost('acme', 's1')).toEqual({
      requests: 4,
      upstream: usage(31, 300, 3_010, 91),
      tokens_kept_out: 1_000,
      kept_out_units: 100,
      summary_calls: 1,
      summary_input_tokens: 10,
      summary_output_tokens: 5
    })
  })
})
