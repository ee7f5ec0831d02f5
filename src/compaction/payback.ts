/**
 * Whether a crossing pays back: the economics of compacting a cached conversation now or later.
 *
 * Compacting rewrites the prompt's prefix: the request after it writes the kept prompt to the provider's
 * cache (at the cache-write price) where it would have read it (at the read price). From then on each
 * request reads the removed tokens no more: it saves them at the read price. A compaction made near the end
 * of a conversation pays the rewrite and saves little; one made where the conversation goes on pays back.
 * The budget is then a target, and the limit (the model's window, or the operator's bound) the line that
 * always holds.
 *
 * How long a conversation goes on is not known; the estimate is the one a heavy-tailed length gives (a
 * conversation that has run n requests is as likely as not to run about n more), read from its messages so
 * that it survives a restart and another replica. Pure: the pace and prices come in, a decision goes out.
 */

/** Prices of the prompt cache, each as a multiple of an uncached input token's. */
export interface CachePrices {
  cache_write: number
  cache_read: number
}

export interface CrossingCase {
  /** The prompt's estimate now, over the budget. */
  tokens: number
  /** The hard bound: a prompt over it is compacted whatever the pace says. */
  limit: number
  /** The prompt's estimate after the compaction (what the rewrite writes to the cache). */
  keptTokens: number
  /** Requests the conversation has made so far (its messages read as turns). */
  requestsSoFar: number
  /** Tokens a request adds, and milliseconds between requests (the pace); undefined until seen. */
  growth?: number
  intervalMs?: number
  /** How long the provider's cache lives without a request. */
  cacheMs: number
  prices: CachePrices
}

export type CrossingCall =
  | {
      kind: 'compact'
      /**
       * over_limit: the prompt is over the hard bound; cache_cold: requests come further apart than the cache
       * lives (each writes its prefix anyway, so the rewrite costs nothing more); pays_back: the conversation is
       * expected to run long enough; reaches_limit: it is expected to reach the limit before it ends.
       */
      because: 'over_limit' | 'cache_cold' | 'pays_back' | 'reaches_limit'
    }
  | {
      kind: 'wait'
      /** The requests after this one by which a compaction now would have paid its rewrite back. */
      paysBackAfter: number
      /** The requests the conversation is expected to go on for. */
      expectedRequests: number
    }

export function crossingCall(c: CrossingCase): CrossingCall {
  if (c.tokens > c.limit) return { kind: 'compact', because: 'over_limit' }
  if (c.intervalMs !== undefined && c.intervalMs > c.cacheMs) return { kind: 'compact', because: 'cache_cold' }
  const removed = c.tokens - c.keptTokens
  // the premium of the rewrite: the kept prompt written where it would have been read
  const premium = Math.max(0, c.prices.cache_write - c.prices.cache_read) * c.keptTokens
  const savedPerRequest = c.prices.cache_read * removed
  // nothing to save (or to pay): waiting gains nothing
  if (savedPerRequest <= 0 || premium === 0) return { kind: 'compact', because: 'pays_back' }
  // (this request saves the removed tokens' read too: it writes the kept prompt in place of reading all of it)
  const paysBackAfter = Math.max(0, Math.ceil(premium / savedPerRequest) - 1)
  const expectedRequests = Math.max(0, c.requestsSoFar)
  if (expectedRequests >= paysBackAfter) return { kind: 'compact', because: 'pays_back' }
  const toLimit = c.growth !== undefined && c.growth > 0 ? Math.floor((c.limit - c.tokens) / c.growth) : Infinity
  if (expectedRequests >= toLimit) return { kind: 'compact', because: 'reaches_limit' }
  return { kind: 'wait', paysBackAfter, expectedRequests }
}

/** The requests a history of `messages` messages took: a request adds the model's turn and the answer to it (a tool's result, the user's next message). */
export function requestsOf(messages: number): number {
  return Math.max(1, Math.floor(messages / 2))
}
