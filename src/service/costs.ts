import { createHash } from 'node:crypto'
import type { UpstreamUsage } from '../proxy/usage.js'
import type { Store } from '../storage/store.js'

/** Input price multiples, as the Messages API bills them: cache writes 1.25x, cache reads 0.1x, output 5x (Sonnet's ratio). */
export const PRICE = { input: 1, cache_write: 1.25, cache_read: 0.1, output: 5 } as const

/** What a session's proxied requests cost, summed: the upstream's own usage, and the gateway's summary calls. */
export interface SessionCost {
  requests: number
  /** The session is in the control group: sent through uncompacted (an earlier version's kept cost says nothing of it). */
  control?: boolean
  upstream: UpstreamUsage
  /** Tokens the proxy kept out of the requests it forwarded (the client's history less what was sent). */
  tokens_kept_out: number
  /** What they would have cost: at the cache-read price where the request read from the cache, else at the input price. */
  kept_out_units: number
  summary_calls: number
  summary_input_tokens: number
  summary_output_tokens: number
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
  const requests =
    PRICE.input * u.input_tokens +
    PRICE.cache_write * u.cache_creation_input_tokens +
    PRICE.cache_read * u.cache_read_input_tokens +
    PRICE.output * u.output_tokens
  const summaries = PRICE.input * cost.summary_input_tokens + PRICE.output * cost.summary_output_tokens
  const billed = requests + summaries
  const uncompacted = requests + cost.kept_out_units
  const round = (x: number): number => Math.round(x)
  return {
    billed_units: round(billed),
    uncompacted_units: round(uncompacted),
    saved_units: round(uncompacted - billed),
    saved_share: uncompacted > 0 ? Math.round((1000 * (uncompacted - billed)) / uncompacted) / 1000 : 0
  }
}

/**
 * What an earlier version kept of a session's cost (one row of the store's state, until it expires), so
 * that its sum goes on from it; undefined where it kept none.
 */
export async function legacyCost(store: Pick<Store, 'getState'>, keyName: string, session: string, nowMs: number): Promise<SessionCost | undefined> {
  return ((await store.getState(keyOf(keyName, session), nowMs)) as SessionCost | undefined) ?? undefined
}

function keyOf(keyName: string, session: string): string {
  return `cost:${createHash('sha256').update(`${keyName}\u0000${session}`).digest('hex')}`
}
