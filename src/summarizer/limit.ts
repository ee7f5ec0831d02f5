import { CancelledError, OverloadedError } from './errors.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'

export interface LimitOptions {
  /** Summaries in flight at once. */
  concurrency: number
  /** Summaries waiting for a place; past this a request is turned away. */
  queue: number
  /** How long a summary may wait for a place before it is turned away. */
  maxWaitMs: number
  /** What the 503 tells the client to wait, in seconds. */
  retryAfterS: number
}

/**
 * Bounds model summaries in flight, with a short queue. A request that finds the queue full, or waits
 * in it longer than `maxWaitMs`, gets an OverloadedError (503 with Retry-After) instead of waiting
 * without end; a summary whose every caller has gone (its queue signal) leaves the queue at once.
 */
export class LimitedSummarizer implements Summarizer {
  readonly kind: Summarizer['kind']
  private active = 0
  private readonly waiting: (() => void)[] = []

  constructor(
    private readonly inner: Summarizer,
    private readonly options: LimitOptions
  ) {
    this.kind = inner.kind
  }

  /** Summaries running and waiting now, for the saturation gauges. */
  get load(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length }
  }

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    if (this.active >= this.options.concurrency) {
      if (this.waiting.length >= this.options.queue) {
        throw new OverloadedError(`${this.active} summaries in flight and ${this.waiting.length} waiting`, this.options.retryAfterS)
      }
      await this.waitForPlace(request.queueSignal ?? request.signal)
    } else {
      this.active++
    }
    try {
      return await this.inner.summarize(request)
    } finally {
      const next = this.waiting.shift()
      if (next)
        next() // the place passes straight to the next in line
      else this.active--
    }
  }

  private waitForPlace(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const leave = (err: Error): void => {
        const at = this.waiting.indexOf(waiter)
        if (at >= 0) this.waiting.splice(at, 1)
        cleanup()
        reject(err)
      }
      // a client that left is a cancellation, not an overload (it is counted as one)
      const onAbort = (): void => leave(new CancelledError('the client went away while its summary waited for a place'))
      const timer = setTimeout(
        () => leave(new OverloadedError(`no summary place within ${this.options.maxWaitMs} ms`, this.options.retryAfterS)),
        this.options.maxWaitMs
      )
      const cleanup = (): void => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      const waiter = (): void => {
        cleanup()
        resolve()
      }
      if (signal?.aborted) return onAbort()
      signal?.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(waiter)
    })
  }
}
