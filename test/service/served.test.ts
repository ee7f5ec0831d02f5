import { afterEach, describe, expect, it } from 'vitest'
import { type CompactDeps, runCompaction, summarized } from '../../src/service/compact.js'
import { Activity } from '../../src/service/activity.js'
import { FAULT_BURST_MS, FaultWarnings, type ServedAt, type Serving, serveCompaction, warnSummarizerFault } from '../../src/service/served.js'
import { ReadYourWrites } from '../../src/storage/read-your-writes.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { createMetrics } from '../../src/telemetry/metrics.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import { tempDb } from '../helpers/process.js'
import { shellStep, user } from '../helpers/history.js'

const history = [
  user('Fix the flaky retry test in src/net/retry.ts'),
  ...Array.from({ length: 30 }, (_, i) => shellStep(`t${i}`, `npm test -- retry ${i}`, `run ${i}\n${'o'.repeat(600)}`)).flat()
]
let ids = 0
const deps: CompactDeps = {
  defaults: { budgetTokens: 2_000, keepTurns: 4 },
  extractive: new ExtractiveSummarizer(),
  newId: () => `cmp_served_${++ids}`,
  now: () => performance.now(),
  coldLayer: true
}

/** A log that keeps what it is given. */
function capturing(): { lines: { level: string; fields: Record<string, unknown>; message: string }[]; log: ServedAt['log'] } {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const at =
    (level: string) =>
    (fields: unknown, message?: string): void =>
      void lines.push({ level, fields: fields as Record<string, unknown>, message: message ?? '' })
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } as unknown as ServedAt['log'] }
}

const opened: { close: () => Promise<void> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0)) await o.close()
})

function serving(path = ':memory:'): Serving & { activity: Activity } {
  const store = new ReadYourWrites(new SqliteStore(path))
  const activity = new Activity(store, (err) => {
    throw err
  })
  opened.push(activity, store)
  return { store, metrics: createMetrics(), activity, modelKind: 'anthropic', faults: new FaultWarnings() }
}

describe('serveCompaction', () => {
  it('serves a compaction the same way from the route and from a proxy: counted, one event with the same fields, tallied, recorded', async () => {
    const s = serving()
    const events: Record<string, unknown>[] = []
    for (const via of ['route', 'proxy'] as const) {
      const run = await runCompaction({ messages: history, sessionId: `sess-${via}` }, deps, { keyName: 'alpha' })
      if (!summarized(run.response)) throw new Error('not summarized')
      const { lines, log } = capturing()
      const scheduled = await serveCompaction(s, run, {
        via,
        keyName: 'alpha',
        session: `sess-${via}`,
        mode: 'auto',
        budgetTokens: 2_000,
        log,
        started: performance.now(),
        ...(via === 'proxy' ? { endpoint: 'messages', source: 'merged' as const, waitMs: 7 } : {})
      })
      // :memory: keeps no journal: the record is written before the answer, the cold layer after it
      await scheduled.recorded
      scheduled.begin?.()
      expect(lines.map((l) => [l.level, l.message])).toEqual([['info', 'context_compacted']])
      events.push(lines[0]!.fields)
      const page = await s.store.listRecords(`sess-${via}`, 'alpha', { limit: 5 })
      expect(page.records.map((r) => r.id)).toEqual([run.response.summary.id])
      expect(await s.store.recall(`sess-${via}`, 'alpha', { text: 'retry', limit: 1 })).toHaveLength(1)
    }
    const [route, proxy] = events as [Record<string, unknown>, Record<string, unknown>]
    // the proxy's event says where it came from, and nothing else differs in kind
    expect(Object.keys(proxy).sort()).toEqual([...Object.keys(route), 'endpoint', 'source'].sort())
    expect(route).toMatchObject({
      event: 'context_compacted',
      via: 'route',
      session_id: 'sess-route',
      key_name: 'alpha',
      mode: 'auto',
      reason: 'over_budget',
      summarizer: 'extractive'
    })
    expect(proxy).toMatchObject({ via: 'proxy', endpoint: 'messages', source: 'merged' })
    const counted = await s.metrics.registry.getSingleMetricAsString('compaction_proxy_compactions_total')
    expect(counted).toContain('source="merged"} 1')
    const figures = await s.activity.figures('alpha', null, { fromMs: Date.now() - 3_600_000, toMs: Date.now() + 3_600_000 }, 3_600_000)
    expect(figures.compactions).toMatchObject({ total: 2, via_proxy: 1, via_compact_route: 1 })
    // the proxy's crossing waited 7 ms, and only it is a crossing
    expect(figures.crossings).toMatchObject({ count: 1, max_wait_ms: 7 })
  })

  it('logs a compaction skipped, and records nothing for it', async () => {
    const s = serving()
    const run = await runCompaction({ messages: history.slice(0, 3), sessionId: 'sess-small' }, deps, { keyName: 'alpha' })
    expect(run.response.compacted).toBe(false)
    const { lines, log } = capturing()
    expect(
      await serveCompaction(s, run, {
        via: 'route',
        keyName: 'alpha',
        session: 'sess-small',
        mode: 'auto',
        budgetTokens: 2_000,
        log,
        started: performance.now()
      })
    ).toEqual({})
    expect(lines.map((l) => l.fields.event)).toEqual(['compaction_skipped'])
    expect((await s.store.listRecords('sess-small', 'alpha', { limit: 5 })).records).toEqual([])
  })

  it('journals the record of a SQLite file at once and begins its writes when told; reads of the session wait for them', async () => {
    const s = serving(tempDb())
    const run = await runCompaction({ messages: history, sessionId: 'sess-file' }, deps, { keyName: 'alpha' })
    const { log } = capturing()
    const scheduled = await serveCompaction(s, run, {
      via: 'route',
      keyName: 'alpha',
      session: 'sess-file',
      mode: 'auto',
      budgetTokens: 2_000,
      log,
      started: performance.now()
    })
    expect(scheduled.recorded).toBeUndefined()
    expect(scheduled.unkept).toBeUndefined()
    const listed = s.store.listRecords('sess-file', 'alpha', { limit: 5 })
    scheduled.begin?.()
    expect((await listed).records).toHaveLength(1)
  })
})

describe('a summarizer fault warned of once a burst', () => {
  it('warns of the first of each reason at once, then of the next past the burst with how many came between', () => {
    let now = 0
    const faults = new FaultWarnings(() => now)
    const warned: Record<string, unknown>[] = []
    const log = { warn: (fields: Record<string, unknown>) => void warned.push(fields), info: () => undefined, error: () => undefined }
    for (let i = 0; i < 5; i++) warnSummarizerFault(faults, log as never, 'rate_limited', { session_id: 's' })
    warnSummarizerFault(faults, log as never, 'overloaded', {})
    warnSummarizerFault(faults, log as never, 'no_api_key', {})
    warnSummarizerFault(faults, log as never, null, {})
    expect(warned.map((w) => w.reason)).toEqual(['rate_limited', 'overloaded'])
    expect(warned[0]).toMatchObject({ event: 'summarizer_fault', session_id: 's' })
    now += FAULT_BURST_MS
    warnSummarizerFault(faults, log as never, 'rate_limited', {})
    expect(warned.at(-1)).toMatchObject({ reason: 'rate_limited', since_last_warning: 4 })
  })
})
