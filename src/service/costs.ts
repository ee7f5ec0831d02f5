import { createHash } from 'node:crypto'
import type { UpstreamUsage } from '../proxy/usage.js'
import type { Store } from '../storage/store.js'

/** Input price multiples, as the Messages API bills them: cache writes 1.25x, cache reads 0.1x, output 5x (Sonnet's ratio). */
export const PRICE = { input: 1, cache_write: 1.25, cache_read: 0.1, output: 5 } as const

/** What a session's proxied requests cost, summed: the upstream's own usage, and the gateway's summary calls. */
export interface SessionCost {
  requests: number
  upstream: UpstreamUsage
  /** Tokens the proxy kept out of the requests it forwarded (the client's history less what was sent). */
  tokens_kept_out: number
  /** What they would have cost: at the cache-read price where the request read from the cache, else at the input price. */
  kept_out_units: number
  summary_calls: number
  summary_input_tokens: number
  summary_output_tokens: number
}

function empty(): SessionCost {
  return {
    requests: 0,
    upstream: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 },
    tokens_kept_out: 0,
    kept_out_units: 0,
    summary_calls: 0,
    summary_input_tokens: 0,
    summary_output_tokens: 0
  }
}

/** Two usages summed, field by field. */
function sumUsage(a: UpstreamUsage, b: UpstreamUsage): UpstreamUsage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    cache_creation_input_tokens: a.cache_creation_input_tokens + b.cache_creation_input_tokens,
    cache_read_input_tokens: a.cache_read_input_tokens + b.cache_read_input_tokens,
    output_tokens: a.output_tokens + b.output_tokens
  }
}

/** Two costs summed (a stored one may predate a field: it counts as 0). */
function added(a: SessionCost, b: SessionCost): SessionCost {
  return {
    requests: a.requests + b.requests,
    upstream: sumUsage(a.upstream, b.upstream),
    tokens_kept_out: a.tokens_kept_out + b.tokens_kept_out,
    kept_out_units: (a.kept_out_units ?? 0) + (b.kept_out_units ?? 0),
    summary_calls: a.summary_calls + b.summary_calls,
    summary_input_tokens: a.summary_input_tokens + b.summary_input_tokens,
    summary_output_tokens: a.summary_output_tokens + b.summary_output_tokens
  }
}

/**
 * The estimate, in input-token units: what the session was billed through the gateway (its requests' own
 * usage, and the summary calls, their input counted as uncached), and what it would have been billed without
 * it: the same requests, each also sending what compaction kept out of it (read from the cache where the
 * request read from it, else uncached), and no summary calls. A floor of the uncompacted cost: a longer
 * prompt also writes more to the cache.
 */
export function costEstimate(cost: SessionCost): { billed_units: number; uncompacted_units: number; saved_units: number; saved_share: number } {
  const u = cost.upstream
  const requests = PRICE.input * u.input_tokens + PRICE.cache_write * u.cache_creation_input_tokens + PRICE.cache_read * u.cache_read_input_tokens + PRICE.output * u.output_tokens
  const summaries = PRICE.input * cost.summary_input_tokens + PRICE.output * cost.summary_output_tokens
  const billed = requests + summaries
  const uncompacted = requests + cost.kept_out_units
  const round = (x: number): number => Math.round(x)
  return { billed_units: round(billed), uncompacted_units: round(uncompacted), saved_units: round(uncompacted - billed), saved_share: uncompacted > 0 ? Math.round((1000 * (uncompacted - billed)) / uncompacted) / 1000 : 0 }
}

/** How long a session's cost is kept after its last request. */
const COST_TTL_MS = 30 * 24 * 3600 * 1000
/** How often what was added is written to the store. */
const FLUSH_MS = 5_000

/**
 * Each session's cost, added to as its requests are answered and written to the store every few seconds
 * (a read, the sum, a write: two replicas adding at the same moment may lose one's few seconds). Kept with
 * the session's owner, so that deleting the session deletes it.
 */
export class SessionCosts {
  private readonly pending = new Map<string, { tenant: string; session: string; cost: SessionCost }>()
  private readonly timer: NodeJS.Timeout
  private flushing: Promise<void> | undefined

  constructor(
    private readonly store: Pick<Store, 'getState' | 'putState'>,
    private readonly onFault: (err: unknown) => void,
    private readonly now: () => number = Date.now
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS)
    this.timer.unref()
  }

  /** An answered request's usage, and the tokens the proxy kept out of it. */
  addRequest(tenant: string, session: string, usage: UpstreamUsage | undefined, keptOut: number): void {
    const cost = this.entry(tenant, session)
    cost.requests++
    const kept = Math.max(0, Math.round(keptOut))
    cost.tokens_kept_out += kept
    cost.kept_out_units += kept * (usage && usage.cache_read_input_tokens > 0 ? PRICE.cache_read : PRICE.input)
    if (usage) cost.upstream = sumUsage(cost.upstream, usage)
  }

  /** A summary the gateway had written for the session (used or not). */
  addSummary(tenant: string, session: string, report: { calls: number; input_tokens: number; output_tokens: number }): void {
    const cost = this.entry(tenant, session)
    cost.summary_calls += report.calls
    cost.summary_input_tokens += report.input_tokens
    cost.summary_output_tokens += report.output_tokens
  }

  async get(tenant: string, session: string): Promise<SessionCost> {
    const stored = ((await this.store.getState(keyOf(tenant, session), this.now())) as SessionCost | undefined) ?? empty()
    const pending = this.pending.get(keyOf(tenant, session))
    return pending ? added(stored, pending.cost) : added(empty(), stored)
  }

  /** Forgets what was not written yet of a session being deleted (the store's copy goes with the session). */
  forget(tenant: string, session: string): void {
    this.pending.delete(keyOf(tenant, session))
  }

  /** Writes what was added since the last flush. */
  async flush(): Promise<void> {
    await this.flushing
    const batch = [...this.pending.entries()]
    this.pending.clear()
    this.flushing = (async () => {
      for (const [key, { tenant, session, cost }] of batch) {
        try {
          const stored = ((await this.store.getState(key, this.now())) as SessionCost | undefined) ?? empty()
          await this.store.putState(key, added(stored, cost), this.now() + COST_TTL_MS, { key_name: tenant, session_id: session })
        } catch (err) {
          this.onFault(err)
        }
      }
    })()
    await this.flushing
  }

  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }

  private entry(tenant: string, session: string): SessionCost {
    const key = keyOf(tenant, session)
    let e = this.pending.get(key)
    if (!e) {
      e = { tenant, session, cost: empty() }
      this.pending.set(key, e)
    }
    return e.cost
  }
}

function keyOf(tenant: string, session: string): string {
  return `cost:${createHash('sha256').update(`${tenant}\u0000${session}`).digest('hex')}`
}
