import { describe, expect, it } from 'vitest'
import { emptySections, planCompaction } from '../../src/compaction/index.js'
import { CachingSummarizer } from '../../src/summarizer/cache.js'
import type { SummarizeResult, Summarizer } from '../../src/summarizer/summarizer.js'
import type { Store } from '../../src/storage/store.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { assistant, user } from '../helpers/history.js'

const plan = planCompaction({ messages: [user('fix the parser'), assistant('done'), user('next')], mode: 'manual', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 1, dryRun: false })

class CountingModel implements Summarizer {
  readonly kind = 'anthropic' as const
  calls = 0
  async summarize(): Promise<SummarizeResult> {
    this.calls++
    const sections = emptySections()
    sections.objective = 'fix the parser'
    return { sections, report: { kind: 'anthropic', model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 1 } }
  }
}

/** A store whose cache reads or writes fail, as a full disk or a locked file would make them. */
function failing(store: Store, what: 'read' | 'write'): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if ((what === 'read' && prop === 'getCached') || (what === 'write' && prop === 'putCached')) {
        return () => {
          throw new Error(`disk I/O error on cache ${what}`)
        }
      }
      return Reflect.get(target, prop, receiver) as unknown
    }
  })
}

describe('the summary cache', () => {
  it.each(['read', 'write'] as const)('serves a summary when its cache %s fails, and reports the failure', async (what) => {
    const model = new CountingModel()
    const errors: string[] = []
    const cache = new CachingSummarizer(model, {
      store: failing(new SqliteStore(':memory:'), what),
      ttlMs: 60_000,
      model: 'm',
      now: () => 1_000,
      onStoreError: (operation) => errors.push(operation)
    })
    const first = await cache.summarize({ plan, tenant: '' })
    expect(first.sections?.objective).toBe('fix the parser')
    await new Promise((r) => setImmediate(r))
    expect(errors).toContain(`cache_${what}`)
    // without a working cache, a repeat asks the model again rather than failing
    await cache.summarize({ plan, tenant: '' })
    expect(model.calls).toBe(2)
  })
})
