import { createHash } from 'node:crypto'
import { SUMMARY_FORMAT_VERSION, formatSummary, redactSections, renderedSpan, spanText } from '../compaction/index.js'
import { DOCTRINE_VERSION } from '../prompts/doctrine.js'
import type { Store } from '../storage/store.js'
import type { SummarizeRequest, SummarizeResult, Summarizer, SummarizerReport } from './summarizer.js'

export interface CacheOptions {
  store: Store
  ttlMs: number
  /** The model the summaries come from; part of the key. */
  model: string
  now: () => number
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
    request.tenant ?? '',
    request.instructions?.trim() ?? '',
    plan.prior ? formatSummary(plan.prior, { id: 'prior', compactedTurns: 0 }) : '',
    spanText(renderedSpan(plan))
  ]
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex')
}

/**
 * A summary is paid for once: a hit answers from the store with kind "cache", and identical requests
 * in flight at the same time share one model call. The shared call does not follow any one client's
 * cancellation, so that a client that gave up and retries finds the summary done.
 */
export class CachingSummarizer implements Summarizer {
  readonly kind = 'anthropic' as const
  private readonly inflight = new Map<string, Promise<SummarizeResult>>()

  constructor(
    private readonly inner: Summarizer,
    private readonly options: CacheOptions
  ) {}

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const started = this.options.now()
    const key = summaryCacheKey(request, this.options.model)
    const hit = this.read(key)
    if (hit) return { sections: hit.sections, report: this.cacheReport(hit.model, started) }

    const shared = this.inflight.get(key)
    if (shared) {
      const result = await shared
      // A follower made no call of its own: it reports the shared answer as a cache hit.
      return result.sections ? { sections: result.sections, report: this.cacheReport(result.report.model, started) } : result
    }
    const call = this.inner
      .summarize({ ...request, signal: undefined })
      .then((result) => {
        if (result.sections && result.report.kind === 'anthropic') {
          // The model's answer is redacted before it is stored: a model may repeat a secret back.
          const sections = redactSections(result.sections, request.plan.redactParts)
          try {
            this.options.store.putCached(key, { sections, model: result.report.model }, this.options.now() + this.options.ttlMs)
          } catch (err) {
            this.options.onStoreError('cache_write', err)
          }
        }
        return result
      })
      .finally(() => this.inflight.delete(key))
    this.inflight.set(key, call)
    return call
  }

  private read(key: string) {
    try {
      return this.options.store.getCached(key, this.options.now())
    } catch (err) {
      this.options.onStoreError('cache_read', err)
      return undefined
    }
  }

  private cacheReport(model: string | null, started: number): SummarizerReport {
    return { kind: 'cache', model, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: Math.round(this.options.now() - started) }
  }
}
