import type { ResponseView, Summarized } from './compact.js'
import { WAIT_BOUNDS_MS } from '../contract/defaults.js'
import type { UpstreamUsage } from '../proxy/usage.js'
import type { ActivityRow, ActivityTally, Store } from '../storage/store.js'
import { type SessionCost, PRICE, legacyCost } from './costs.js'
import { type GroupTally, type MeasuredSavings, lengthBin, measuredSavings } from './control.js'

/** An hour, in ms: the tallies' grain. */
export const HOUR_MS = 3_600_000
/** How often what was tallied is written to the store. */
const FLUSH_MS = 5_000

/** A model name as a tally's name takes it (bounded, so that a client cannot grow the rows of a tally without end). */
const MODEL_NAME = /^[\w.:@/-]{1,80}$/

/** What the tallies of a range say, as GET /v1/overview answers (less the prices' estimate, made by `overview`). */
export interface ActivityFigures {
  compactions: { total: number; via_proxy: number; via_compact_route: number; tokens_before: number; tokens_after: number; tokens_removed: number }
  /** Crossings clearing answered (old tool results cleared, nothing summarized). */
  clearings: { count: number; tool_results: number; tokens_cleared: number }
  summaries: {
    model: number
    extractive_chosen: number
    fallback: number
    cache: number
    fallback_reasons: Record<string, number>
    models: Record<string, number>
  }
  crossings: { count: number; mean_wait_ms: number | null; max_wait_ms: number | null; waits: { up_to_ms: number | null; count: number }[] }
  requests: {
    count: number
    tokens_kept_out: number
    /** Requests whose answers' usage the proxy reads (the Messages API's), and the tokens kept out of them. */
    metered: number
    metered_tokens_kept_out: number
    metered_tokens_kept_out_cached: number
    upstream: UpstreamUsage
  }
  summary_calls: { calls: number; input_tokens: number; output_tokens: number }
  /** The control group's comparison (COMPACT_CONTROL_SHARE); null where no control request was metered. */
  measured: MeasuredSavings | null
  /** The prompt cache around the proxied compactions, summed (the upstream's own usage of the requests that crossed and of those after). */
  compaction_cache: CompactionCache
  /** The same for each compaction of a session read alone (by its summary id); empty for a tenant's total. */
  byCompaction: Record<string, CompactionCache>
  series: { at: string; compactions: number; tokens_removed: number; tokens_kept_out: number; crossings: number }[]
}

/** The prompt cache around compactions: the requests that crossed (read, written, what they left of the cache unread) and those after them. */
export interface CompactionCache {
  crossings: number
  crossing_read: number
  crossing_written: number
  invalidated: number
  after_requests: number
  after_read: number
  after_written: number
}

const CACHE_FIGURES = ['crossings', 'crossing_read', 'crossing_written', 'invalidated', 'after_requests', 'after_read', 'after_written'] as const

/** Prices per million tokens an estimate is made at, in `currency` (an ISO 4217 code). */
export interface Prices {
  currency: string
  input: number
  output: number
  cache_write: number
  cache_read: number
}

/** What compaction saved at `prices`: billed through the gateway, and what the same requests would have been billed without it. */
export interface Savings {
  prices: Prices
  billed: number
  without_compaction: number
  saved: number
  saved_share: number | null
}

/**
 * The estimate at `prices`: billed is the upstream's own usage of the metered requests (the Messages API's) plus the gateway's
 * summary calls (their input at the input price); without compaction, the same requests would also have
 * sent what compaction kept out of each, at the cache-read price where the request read from the cache and
 * at the input price where it did not, and no summary would have been written. A floor of the uncompacted
 * cost: a longer prompt also writes more to the cache, and an agent's requests past its window would fail.
 */
export function savingsAt(figures: Pick<ActivityFigures, 'requests' | 'summary_calls'>, prices: Prices): Savings {
  const per = (tokens: number, price: number): number => (tokens * price) / 1_000_000
  const u = figures.requests.upstream
  const requests =
    per(u.input_tokens, prices.input) +
    per(u.cache_creation_input_tokens, prices.cache_write) +
    per(u.cache_read_input_tokens, prices.cache_read) +
    per(u.output_tokens, prices.output)
  const summaries = per(figures.summary_calls.input_tokens, prices.input) + per(figures.summary_calls.output_tokens, prices.output)
  const cached = figures.requests.metered_tokens_kept_out_cached
  const keptOut = per(cached, prices.cache_read) + per(figures.requests.metered_tokens_kept_out - cached, prices.input)
  const billed = requests + summaries
  const without = requests + keptOut
  const cents = (x: number): number => Math.round(x * 10_000) / 10_000
  return {
    prices,
    billed: cents(billed),
    without_compaction: cents(without),
    saved: cents(without - billed),
    saved_share: without > 0 ? Math.round((1_000 * (without - billed)) / without) / 1_000 : null
  }
}

function emptyCache(): CompactionCache {
  return { crossings: 0, crossing_read: 0, crossing_written: 0, invalidated: 0, after_requests: 0, after_read: 0, after_written: 0 }
}

/** The tallies of a range read into its figures; `bucketMs` the series' step (an hour or a day), from `fromMs`. */
export function figuresOf(rows: readonly ActivityRow[], range: { fromMs: number; toMs: number }, bucketMs: number): ActivityFigures {
  const sum = new Map<string, number>()
  const steps = Math.max(1, Math.ceil((range.toMs - range.fromMs) / bucketMs))
  const series = Array.from({ length: steps }, (_, i) => ({
    at: new Date(range.fromMs + i * bucketMs).toISOString(),
    compactions: 0,
    tokens_removed: 0,
    tokens_kept_out: 0,
    crossings: 0
  }))
  let maxWait: number | null = null
  for (const r of rows) {
    if (r.name.startsWith('max:')) {
      if (r.name === 'max:wait_ms') maxWait = Math.max(maxWait ?? 0, r.value)
      continue
    }
    sum.set(r.name, (sum.get(r.name) ?? 0) + r.value)
    const point = series[Math.floor((r.hour_ms - range.fromMs) / bucketMs)]
    if (!point) continue
    if (r.name === 'compactions') point.compactions += r.value
    else if (r.name === 'tokens_before') point.tokens_removed += r.value
    else if (r.name === 'tokens_after') point.tokens_removed -= r.value
    else if (r.name === 'kept_out') point.tokens_kept_out += r.value
    else if (r.name === 'crossings') point.crossings += r.value
  }
  const n = (name: string): number => Math.round(sum.get(name) ?? 0)
  const named = (prefix: string): Record<string, number> =>
    Object.fromEntries(
      [...sum.entries()]
        .filter(([k]) => k.startsWith(prefix))
        .map(([k, v]): [string, number] => [k.slice(prefix.length), Math.round(v)])
        .sort((a, b) => b[1] - a[1])
    )
  const fallbackReasons = named('fallback:')
  const byCompaction: Record<string, CompactionCache> = {}
  for (const [k, v] of sum) {
    const m = /^cmp:([^:]+):(\w+)$/.exec(k)
    if (!m || !(CACHE_FIGURES as readonly string[]).includes(m[2] as string)) continue
    const c = (byCompaction[m[1] as string] ??= emptyCache())
    c[m[2] as keyof CompactionCache] += Math.round(v)
  }
  // the control group's tallies: ab:GROUP:BIN:n|units|squares
  const groups: { treated: GroupTally[]; control: GroupTally[] } = { treated: [], control: [] }
  for (const [k, v] of sum) {
    const m = /^ab:(treated|control):(\d+):(n|units|squares)$/.exec(k)
    if (!m) continue
    const bins = groups[m[1] as 'treated' | 'control']
    const bin = Number(m[2])
    const t = (bins[bin] ??= { n: 0, units: 0, squares: 0 })
    t[m[3] as keyof GroupTally] += v
  }
  const crossings = n('crossings')
  return {
    compactions: {
      total: n('compactions'),
      via_proxy: n('via:proxy'),
      via_compact_route: n('via:route'),
      tokens_before: n('tokens_before'),
      tokens_after: n('tokens_after'),
      tokens_removed: n('tokens_before') - n('tokens_after')
    },
    clearings: { count: n('clearings'), tool_results: n('cleared_uses'), tokens_cleared: n('tokens_cleared') },
    summaries: {
      model: n('writer:model'),
      extractive_chosen: n('writer:extractive'),
      fallback: Object.values(fallbackReasons).reduce((a, b) => a + b, 0),
      cache: n('writer:cache'),
      fallback_reasons: fallbackReasons,
      models: named('model:')
    },
    crossings: {
      count: crossings,
      mean_wait_ms: crossings > 0 ? Math.round((10 * (sum.get('wait_ms') ?? 0)) / crossings) / 10 : null,
      max_wait_ms: maxWait === null ? null : Math.round(10 * maxWait) / 10,
      waits: [...WAIT_BOUNDS_MS.map((b) => ({ up_to_ms: b as number | null, count: n(`wait:${b}`) })), { up_to_ms: null, count: n('wait:more') }]
    },
    requests: {
      count: n('requests'),
      tokens_kept_out: n('kept_out'),
      metered: n('metered'),
      metered_tokens_kept_out: n('metered_kept_out'),
      metered_tokens_kept_out_cached: n('kept_out_cached'),
      upstream: {
        input_tokens: n('input'),
        cache_creation_input_tokens: n('cache_write'),
        cache_read_input_tokens: n('cache_read'),
        output_tokens: n('output')
      }
    },
    summary_calls: { calls: n('summary_calls'), input_tokens: n('summary_input'), output_tokens: n('summary_output') },
    measured: measuredSavings(groups, PRICE.input * n('summary_input') + PRICE.output * n('summary_output')),
    compaction_cache: Object.fromEntries(CACHE_FIGURES.map((f) => [f, n(`cache:${f}`)])) as unknown as CompactionCache,
    byCompaction,
    series: series.map((p) => ({ ...p, tokens_removed: Math.round(p.tokens_removed), tokens_kept_out: Math.round(p.tokens_kept_out) }))
  }
}

/** A compaction as the tallies take it: who wrote its summary, how much it removed, and how long its crossing waited (proxied ones). */
export interface CompactionEvent {
  via: 'proxy' | 'route'
  response: Summarized<ResponseView>
  /** The proxied request's wait from its arrival to its forwarding. */
  waitMs?: number
}

/**
 * What the gateway did for each tenant, tallied by the hour in memory and written to the store every few
 * seconds (Store.addActivity adds to what is there: replicas sharing a store add up): compactions and who
 * wrote their summaries, crossings' waits, proxied requests' usage and what compaction kept out of them,
 * summary calls. Each tally is kept for the tenant and, where a session is known, for the session; deleting
 * the session deletes its own.
 */
export class Activity {
  private pending = new Map<string, ActivityTally>()
  private readonly timer: NodeJS.Timeout
  private flushing: Promise<void> = Promise.resolve()

  constructor(
    private readonly store: Pick<Store, 'addActivity' | 'activity' | 'getState'>,
    private readonly onFault: (err: unknown) => void,
    /** The clock its hours are read from (the app's). */
    readonly now: () => number = Date.now
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS)
    this.timer.unref()
  }

  /** A compaction made (answered by the compact route, or forwarded by a proxy). */
  compaction(keyName: string, session: string | undefined, event: CompactionEvent): void {
    const { response } = event
    const add = (name: string, value: number): void => this.add(keyName, session, name, value)
    add('compactions', 1)
    add(`via:${event.via}`, 1)
    add('tokens_before', response.stats.raw_history_tokens)
    add('tokens_after', response.stats.context_after_compaction)
    const s = response.summarizer
    if (s.kind === 'cache') add('writer:cache', 1)
    else if (s.kind !== 'extractive') {
      add('writer:model', 1)
      if (s.model !== null && MODEL_NAME.test(s.model)) add(`model:${s.model}`, 1)
    } else if (s.fallback_reason && s.fallback_reason !== 'no_api_key') add(`fallback:${s.fallback_reason}`, 1)
    else add('writer:extractive', 1)
    if (event.waitMs !== undefined) this.crossing(keyName, session, event.waitMs)
  }

  /** A crossing that clearing answered (COMPACT_STRATEGY clear or hybrid): the tool results it cleared, the tokens that went, and its wait. */
  clearing(keyName: string, session: string | undefined, event: { uses: number; tokens: number; waitMs: number }): void {
    const add = (name: string, value: number): void => this.add(keyName, session, name, value)
    add('clearings', 1)
    add('cleared_uses', event.uses)
    add('tokens_cleared', event.tokens)
    this.crossing(keyName, session, event.waitMs)
  }

  private crossing(keyName: string, session: string | undefined, waitMs: number): void {
    const add = (name: string, value: number): void => this.add(keyName, session, name, value)
    const wait = Math.max(0, waitMs)
    add('crossings', 1)
    add('wait_ms', wait)
    add('max:wait_ms', wait)
    const bound = WAIT_BOUNDS_MS.find((b) => wait <= b)
    add(`wait:${bound ?? 'more'}`, 1)
  }

  /**
   * A proxied request answered (200): the tokens compaction kept out of it, and, where the proxy read the
   * upstream's usage from its answer (`metered`), what the upstream says it cost. With a control group
   * (`group`), a metered request of a known session is tallied in its group and its history's length bin too.
   */
  request(
    keyName: string,
    session: string | undefined,
    answer: {
      keptOut: number
      metered: boolean
      usage?: UpstreamUsage | undefined
      group?: { control: boolean; historyTokens: number } | undefined
    }
  ): void {
    const add = (name: string, value: number): void => this.add(keyName, session, name, value)
    add('requests', 1)
    const kept = Math.max(0, Math.round(answer.keptOut))
    add('kept_out', kept)
    if (!answer.metered) return
    add('metered', 1)
    add('metered_kept_out', kept)
    const usage = answer.usage
    if (!usage) return
    // what was kept out of a request that read from the cache would have been read from it too
    if (usage.cache_read_input_tokens > 0) add('kept_out_cached', kept)
    add('input', usage.input_tokens)
    add('cache_write', usage.cache_creation_input_tokens)
    add('cache_read', usage.cache_read_input_tokens)
    add('output', usage.output_tokens)
    const { group } = answer
    if (!group || session === undefined) return
    const units =
      PRICE.input * usage.input_tokens +
      PRICE.cache_write * usage.cache_creation_input_tokens +
      PRICE.cache_read * usage.cache_read_input_tokens +
      PRICE.output * usage.output_tokens
    const name = `ab:${group.control ? 'control' : 'treated'}:${lengthBin(group.historyTokens)}`
    add(`${name}:n`, 1)
    add(`${name}:units`, units)
    add(`${name}:squares`, units * units)
    if (group.control) add('control_requests', 1)
  }

  /**
   * The prompt cache around a proxied compaction, from the upstream's own usage: the request that crossed
   * (`crossing`: what it read and wrote, and what the cache held of the conversation before that it no longer
   * read, `invalidated`) or one of the requests after it that carried its summary (`after`). Tallied for the
   * tenant and the session, and for the compaction itself under the session (deleted with it).
   */
  compactionCache(
    keyName: string,
    session: string | undefined,
    summaryId: string,
    event: { phase: 'crossing' | 'after'; usage: UpstreamUsage; invalidated?: number }
  ): void {
    const { usage, phase } = event
    const figures: [string, number][] =
      phase === 'crossing'
        ? [
            ['crossings', 1],
            ['crossing_read', usage.cache_read_input_tokens],
            ['crossing_written', usage.cache_creation_input_tokens],
            ['invalidated', event.invalidated ?? 0]
          ]
        : [
            ['after_requests', 1],
            ['after_read', usage.cache_read_input_tokens],
            ['after_written', usage.cache_creation_input_tokens]
          ]
    const hour = Math.floor(this.now() / HOUR_MS) * HOUR_MS
    for (const [name, value] of figures) {
      this.add(keyName, session, `cache:${name}`, value)
      if (session !== undefined && value !== 0) this.tally(keyName, session, hour, `cmp:${summaryId}:${name}`, value)
    }
  }

  /** One compaction's cache figures (CompactionCache), from its session's tallies; undefined where none were tallied. */
  async cacheOf(keyName: string, session: string, summaryId: string): Promise<CompactionCache | undefined> {
    const f = await this.figures(keyName, session, { fromMs: 0, toMs: this.now() + HOUR_MS }, Number.MAX_SAFE_INTEGER)
    return f.byCompaction[summaryId]
  }

  /** A summary the gateway had a model write for a conversation (used or not). */
  summary(keyName: string, session: string | undefined, report: { calls: number; input_tokens: number; output_tokens: number }): void {
    this.add(keyName, session, 'summary_calls', report.calls)
    this.add(keyName, session, 'summary_input', report.input_tokens)
    this.add(keyName, session, 'summary_output', report.output_tokens)
  }

  /** A tenant's figures over a range (its total, or one session's), with what was tallied and not yet written. */
  async figures(keyName: string, session: string | null, range: { fromMs: number; toMs: number }, bucketMs: number): Promise<ActivityFigures> {
    await this.flush()
    const rows = await this.store.activity(keyName, session, { fromMs: Math.floor(range.fromMs / HOUR_MS) * HOUR_MS, toMs: range.toMs })
    return figuresOf(rows, range, bucketMs)
  }

  /** A session's cost over all that is kept of it (and what an earlier version kept of it as its cost), as GET /v1/sessions/{id}/cost gives it. */
  async sessionCost(keyName: string, session: string): Promise<SessionCost> {
    const [f, legacy] = await Promise.all([
      this.figures(keyName, session, { fromMs: 0, toMs: this.now() + HOUR_MS }, Number.MAX_SAFE_INTEGER),
      legacyCost(this.store, keyName, session, this.now())
    ])
    const cached = f.requests.metered_tokens_kept_out_cached
    const own: SessionCost = {
      requests: f.requests.metered,
      ...((f.measured?.control_requests ?? 0) > 0 ? { control: true } : {}),
      upstream: f.requests.upstream,
      tokens_kept_out: f.requests.metered_tokens_kept_out,
      kept_out_units: PRICE.cache_read * cached + PRICE.input * (f.requests.metered_tokens_kept_out - cached),
      summary_calls: f.summary_calls.calls,
      summary_input_tokens: f.summary_calls.input_tokens,
      summary_output_tokens: f.summary_calls.output_tokens
    }
    if (!legacy) return own
    return {
      requests: own.requests + legacy.requests,
      ...(own.control ? { control: true } : {}),
      upstream: {
        input_tokens: own.upstream.input_tokens + legacy.upstream.input_tokens,
        cache_creation_input_tokens: own.upstream.cache_creation_input_tokens + legacy.upstream.cache_creation_input_tokens,
        cache_read_input_tokens: own.upstream.cache_read_input_tokens + legacy.upstream.cache_read_input_tokens,
        output_tokens: own.upstream.output_tokens + legacy.upstream.output_tokens
      },
      tokens_kept_out: own.tokens_kept_out + legacy.tokens_kept_out,
      kept_out_units: own.kept_out_units + (legacy.kept_out_units ?? 0),
      summary_calls: own.summary_calls + legacy.summary_calls,
      summary_input_tokens: own.summary_input_tokens + legacy.summary_input_tokens,
      summary_output_tokens: own.summary_output_tokens + legacy.summary_output_tokens
    }
  }

  /**
   * Forgets what was not written yet of a session being deleted, and resolves once a write under way has
   * landed (the deletion then takes it too). The tenant's totals keep their numbers: they name no session.
   */
  async forget(keyName: string, session: string): Promise<void> {
    for (const [k, t] of this.pending) if (t.key_name === keyName && t.session_id === session) this.pending.delete(k)
    await this.flushing
  }

  /** Writes what was tallied since the last flush (one at a time: a flush waits for the one before it). */
  async flush(): Promise<void> {
    const next = this.flushing.then(async () => {
      if (this.pending.size === 0) return
      const batch = [...this.pending.values()]
      this.pending = new Map()
      try {
        await this.store.addActivity(batch)
      } catch (err) {
        this.onFault(err)
      }
    })
    this.flushing = next
    await next
  }

  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }

  private add(keyName: string, session: string | undefined, name: string, value: number): void {
    if (!Number.isFinite(value) || (value === 0 && !name.startsWith('max:'))) return
    const hour = Math.floor(this.now() / HOUR_MS) * HOUR_MS
    this.tally(keyName, null, hour, name, value)
    if (session !== undefined) this.tally(keyName, session, hour, name, value)
  }

  private tally(keyName: string, session: string | null, hour: number, name: string, value: number): void {
    const key = `${keyName}\u0000${session ?? ''}\u0000${session === null ? 't' : 's'}\u0000${hour}\u0000${name}`
    const t = this.pending.get(key)
    if (!t) this.pending.set(key, { key_name: keyName, session_id: session, hour_ms: hour, name, value })
    else t.value = name.startsWith('max:') ? Math.max(t.value, value) : t.value + value
  }
}
