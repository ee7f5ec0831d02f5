import { describe, expect, it } from 'vitest'
import { CORE_REDACTORS, emptySections, planCompaction } from '../../src/compaction/index.js'
import { CachingSummarizer } from '../../src/summarizer/cache.js'
import { CancelledError } from '../../src/summarizer/errors.js'
import { LimitedSummarizer } from '../../src/summarizer/limit.js'
import type { SummarizeResult, Summarizer } from '../../src/summarizer/summarizer.js'
import type { Store } from '../../src/storage/store.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { assistant, user } from '../helpers/history.js'

const plan = planCompaction({
  messages: [user('fix the parser'), assistant('done'), user('next')],
  mode: 'manual',
  budgetTokens: 45_000,
  sizingBudgetTokens: 45_000,
  keepTurns: 1,
  dryRun: false
})

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
    const first = await cache.summarize({ redactors: CORE_REDACTORS, plan, keyName: '' })
    expect(first.sections?.objective).toBe('fix the parser')
    await new Promise((r) => setImmediate(r))
    expect(errors).toContain(`cache_${what}`)
    // without a working cache, a repeat asks the model again rather than failing
    await cache.summarize({ redactors: CORE_REDACTORS, plan, keyName: '' })
    expect(model.calls).toBe(2)
  })
})

/** A model that answers when told to. */
class GatedModel implements Summarizer {
  readonly kind = 'anthropic' as const
  readonly open: (() => void)[] = []
  summarize(): Promise<SummarizeResult> {
    return new Promise((resolve) =>
      this.open.push(() =>
        resolve({
          sections: emptySections(),
          report: { kind: 'anthropic', model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 1 }
        })
      )
    )
  }
}

describe('a shared summary waiting for a place', () => {
  it('keeps its place while any of its clients waits, gives it up when all have gone, and a newcomer leads it anew', async () => {
    const model = new GatedModel()
    const limited = new LimitedSummarizer(model, { concurrency: 1, queue: 4, maxWaitMs: 10_000, retryAfterS: 1 })
    const cache = new CachingSummarizer(limited, {
      store: new SqliteStore(':memory:'),
      ttlMs: 60_000,
      model: 'm',
      now: () => 1_000,
      onStoreError: () => undefined
    })
    const other = planCompaction({
      messages: [user('another task entirely'), assistant('ok'), user('go')],
      mode: 'manual',
      budgetTokens: 45_000,
      sizingBudgetTokens: 45_000,
      keepTurns: 1,
      dryRun: false
    })
    const running = cache.summarize({ redactors: CORE_REDACTORS, plan: other, keyName: '' }) // takes the one place
    await new Promise((r) => setImmediate(r))
    const [a, b] = [new AbortController(), new AbortController()]
    const first = cache.summarize({ redactors: CORE_REDACTORS, plan, keyName: '', signal: a.signal }).catch((err: unknown) => err)
    await new Promise((r) => setImmediate(r))
    const second = cache.summarize({ redactors: CORE_REDACTORS, plan, keyName: '', signal: b.signal }).catch((err: unknown) => err)
    await new Promise((r) => setImmediate(r))
    expect(limited.load).toEqual({ active: 1, waiting: 1 }) // one place asked for, for both
    a.abort()
    await new Promise((r) => setImmediate(r))
    expect(limited.load).toEqual({ active: 1, waiting: 1 }) // the second still waits for it
    b.abort()
    expect(await first).toBeInstanceOf(CancelledError)
    expect(await second).toBeInstanceOf(CancelledError)
    expect(limited.load).toEqual({ active: 1, waiting: 0 })
    // a newcomer for the same summary asks for a place of its own, and gets the answer
    const third = cache.summarize({ redactors: CORE_REDACTORS, plan, keyName: '' })
    await new Promise((r) => setImmediate(r))
    model.open.shift()!()
    await running
    await new Promise((r) => setImmediate(r))
    model.open.shift()!()
    expect((await third).sections).toBeDefined()
    expect(limited.load).toEqual({ active: 0, waiting: 0 })
  })
})
