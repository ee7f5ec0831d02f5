import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { PostgresStore } from '../../src/storage/postgres.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import type { Store } from '../../src/storage/store.js'
import { SessionCosts, costEstimate } from '../../src/service/costs.js'
import { tempDb } from '../helpers/process.js'
import { dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

const usage = (input: number, write: number, read: number, output: number) => ({ input_tokens: input, cache_creation_input_tokens: write, cache_read_input_tokens: read, output_tokens: output })

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

for (const backend of backends) {
  describe.skipIf(backend.missing !== undefined)(`a session's cost on ${backend.name}${backend.missing ? ` (skipped: ${backend.missing})` : ''}`, () => {
    it('sums the answers and summaries added, reads what is not written yet, and keeps the sum across flushes and instances', async () => {
      const store = backend.open()
      opened.push(store)
      const errors: unknown[] = []
      const costs = new SessionCosts(store, (err) => errors.push(err))
      costs.addRequest('acme', 's1', usage(10, 1_000, 0, 50), 0)
      costs.addRequest('acme', 's1', usage(12, 200, 1_000, 40), 5_000)
      costs.addRequest('acme', 's1', undefined, 0) // an answer that said nothing of its cost
      costs.addRequest('acme', 's1', usage(0, 0, 0, 0), 100) // a request that read nothing from the cache: what it kept out at the input price
      costs.addSummary('acme', 's1', { calls: 1, input_tokens: 3_000, output_tokens: 400 })
      costs.addRequest('other', 's1', usage(1, 1, 1, 1), 0) // another tenant's session of the same name
      const before = await costs.get('acme', 's1')
      // the kept-out tokens of a request that read from the cache would have been reads too
      expect(before).toMatchObject({ requests: 4, upstream: usage(22, 1_200, 1_000, 90), tokens_kept_out: 5_100, kept_out_units: 600, summary_calls: 1, summary_input_tokens: 3_000, summary_output_tokens: 400 })
      await costs.close()
      const again = new SessionCosts(store, (err) => errors.push(err))
      opened.push(again)
      again.addRequest('acme', 's1', usage(1, 0, 2_000, 10), 0)
      await again.flush()
      expect(await again.get('acme', 's1')).toMatchObject({ requests: 5, upstream: usage(23, 1_200, 3_000, 100) })
      expect((await again.get('other', 's1')).requests).toBe(1)
      expect(errors).toEqual([])
    })

    it('is deleted with its session', async () => {
      const store = backend.open()
      opened.push(store)
      const costs = new SessionCosts(store, () => undefined)
      opened.push(costs)
      costs.addRequest('acme', 'gone', usage(1, 2, 3, 4), 10)
      await costs.flush()
      expect((await costs.get('acme', 'gone')).requests).toBe(1)
      await store.deleteSession('gone', 'acme')
      expect((await costs.get('acme', 'gone')).requests).toBe(0)
    })
  })
}

describe('the estimate', () => {
  it('bills cache writes at 1.25x, reads at 0.1x and output at 5x, the summaries uncached, and credits what was kept out at its price', () => {
    const cost = { requests: 2, upstream: usage(100, 1_000, 10_000, 20), tokens_kept_out: 50_000, kept_out_units: 5_000, summary_calls: 1, summary_input_tokens: 2_000, summary_output_tokens: 100 }
    // 100 + 1,250 + 1,000 + 100 = 2,450 for the requests; 2,000 + 500 for the summary
    expect(costEstimate(cost)).toEqual({ billed_units: 4_950, uncompacted_units: 2_450 + 5_000, saved_units: 2_500, saved_share: 0.336 })
    expect(costEstimate({ ...cost, tokens_kept_out: 0, kept_out_units: 0 }).saved_units).toBe(-2_500)
  })
})
