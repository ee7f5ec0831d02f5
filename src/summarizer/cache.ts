import { createHash } from 'node:crypto'
import { SUMMARY_FORMAT_VERSION, formatSummary, redactSections, renderedSpan, spanText } from '../compaction/index.js'
import { DOCTRINE_VERSION } from '../prompts/doctrine.js'
import type { CachedSummary, Store } from '../storage/store.js'
import type { SharedFlight } from '../storage/redis.js'
import type { SummarizeRequest, SummarizeResult, Summarizer, SummarizerReport } from './summarizer.js'
import { CancelledError } from './errors.js'

/** How often a replica waiting for another's summary looks for it in the shared cache. */
export const FLIGHT_POLL_MS = 100
export const DEFAULT_FLIGHT_TTL_MS = 120_000

export interface CacheOptions {
  store: Store
  ttlMs: number
  /** The model the summaries come from; part of the key. */
  model: string
  now: () => number
  /** Summaries in flight shared with other replicas (Redis); without it, identical calls are shared in this process only. */
  flight?: SharedFlight
  /** How long a replica's claim on a summary lasts at most (it is released when the summary is done). */
  flightTtlMs?: number
  /** Told when the store fails; the summary is served all the same. */
  onStoreError: (operation: 'cache_read' | 'cache_write', err: unknown) => void
}

/**
 * Everything that determines a summary, hashed: the doctrine version, the model, the rendered span
 * (after redaction), the prior summary, the instructions, the summary budget and format, and the tenant.
 */
export function summaryCacheKey(request: SummarizeRequest, model: string): string {
  const { plan } = request
  const parts = [
    DOCTRINE_VERSION,
    model,
    SUMMARY_FORMAT_VERSION,
    Math.floor(plan.summaryMaxTokens / plan.scale),
    request.keyName ?? '',
    request.instructions?.trim() ?? '',
    plan.prior ? formatSummary(plan.prior, { id: 'prior', compactedTurns: 0 }) : '',
    spanText(renderedSpan(plan, request.redactors))
  ]
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex')
}

/**
 * Whether anyone still waits for a shared summary: aborted once every caller that joined has gone (a
 * caller without a signal stays for good).
 */
class Interest {
  readonly interest = new AbortController()
  private waiting = 0

  join(signal?: AbortSignal): void {
    this.waiting++
    if (!signal) return
    const leave = (): void => {
      if (--this.waiting === 0) this.interest.abort()
    }
    if (signal.aborted) leave()
    else signal.addEventListener('abort', leave, { once: true })
  }
}

/**
 * A summary is paid for once: a hit answers from the store with kind "cache", and identical requests
 * in flight at the same time share one model call. The shared call does not follow any one client's
 * cancellation, so that a client that gave up and retries finds the summary done; but a summary still
 * waiting for a place gives it up once every client waiting for it has gone.
 */
export class CachingSummarizer implements Summarizer {
  readonly kind: Summarizer['kind']
  private readonly inflight = new Map<string, { call: Promise<SummarizeResult>; interest: AbortController; join: (signal?: AbortSignal) => void }>()

  constructor(
    private readonly inner: Summarizer,
    private readonly options: CacheOptions
  ) {
    this.kind = inner.kind
  }

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const started = this.options.now()
    const key = summaryCacheKey(request, this.options.model)
    const hit = await this.read(key)
    if (hit) return { sections: hit.sections, report: this.cacheReport(hit.model, started) }

    const shared = this.inflight.get(key)
    if (shared) {
      shared.join(request.signal)
      // A call given up in the queue (its callers had all gone) is no answer for this one: it leads anew.
      const result = await shared.call.catch((err: unknown) => (err instanceof CancelledError ? undefined : Promise.reject(err)))
      // A follower made no call of its own: it reports the shared answer as a cache hit.
      if (result) return result.sections ? { sections: result.sections, report: this.cacheReport(result.report.model, started) } : result
      if (request.signal?.aborted) throw new CancelledError('the client went away while its summary waited for a place')
      return this.summarize(request)
    }
    const flight = new Interest()
    flight.join(request.signal)
    const entry = {
      call: this.lead({ ...request, queueSignal: flight.interest.signal }, key, started),
      interest: flight.interest,
      join: (s?: AbortSignal) => flight.join(s)
    }
    this.inflight.set(key, entry)
    try {
      return await entry.call
    } finally {
      if (this.inflight.get(key) === entry) this.inflight.delete(key)
    }
  }

  /**
   * Makes the call, unless another replica is making it: then its summary is waited for in the shared
   * cache, for as long as it holds the key's lock (and made here after all if it ends without one).
   */
  private async lead(request: SummarizeRequest, key: string, started: number): Promise<SummarizeResult> {
    const flight = this.options.flight
    const role = flight ? await flight.acquire(key, this.options.flightTtlMs ?? DEFAULT_FLIGHT_TTL_MS) : 'alone'
    if (role === 'follower' && flight) {
      const other = await this.awaitOther(flight, key)
      if (other) return { sections: other.sections, report: this.cacheReport(other.model, started) }
    }
    // (when the summary began: a deletion of its session meanwhile refuses its cached copy)
    const begun = Date.now()
    try {
      // the call itself does not follow the clients (a retry finds it done); its queue place does
      const result = await this.inner.summarize({ ...request, signal: undefined })
      // a model's summary (not the extractive one that stood in for it) is kept
      if (result.sections && result.report.kind === this.inner.kind) {
        // The model's answer is redacted before it is stored: a model may repeat a secret back.
        const sections = redactSections(result.sections, request.redactors.redactParts)
        try {
          const owner = request.session === undefined ? undefined : { key_name: request.keyName ?? '', session_id: request.session, since_ms: begun }
          await this.options.store.putCached(key, { sections, model: result.report.model }, this.options.now() + this.options.ttlMs, owner)
        } catch (err) {
          this.options.onStoreError('cache_write', err)
        }
      }
      return result
    } finally {
      if (role === 'leader') await flight?.release(key)
    }
  }

  private async awaitOther(flight: SharedFlight, key: string): Promise<CachedSummary | undefined> {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, FLIGHT_POLL_MS))
      const hit = await this.read(key)
      if (hit) return hit
      if (!(await flight.held(key))) return this.read(key)
    }
  }

  private async read(key: string) {
    try {
      return await this.options.store.getCached(key, this.options.now())
    } catch (err) {
      this.options.onStoreError('cache_read', err)
      return undefined
    }
  }

  private cacheReport(model: string | null, started: number): SummarizerReport {
    return { kind: 'cache', model, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: Math.round(this.options.now() - started) }
  }
}
