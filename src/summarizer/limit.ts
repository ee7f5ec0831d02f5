import { OverloadedError } from '../service/errors.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'

export interface LimitOptions {
  /** Summaries in flight at once. */
  concurrency: number
  /** Summaries waiting for a place; past this a request is turned away. */
  queue: number
  /** What the 503 tells the client to wait, in seconds. */
  retryAfterS: number
}

/**
 * Bounds model summaries in flight, with a short queue. A request that finds the queue full gets an
 * OverloadedError (503 with Retry-After) at once instead of waiting without end.
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

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    if (this.active >= this.options.concurrency) {
      if (this.waiting.length >= this.options.queue) {
        throw new OverloadedError(`${this.active} summaries in flight and ${this.waiting.length} waiting`, this.options.retryAfterS)
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve))
    } else {
      this.active++
    }
    try {
      return await this.inner.summarize(request)
    } finally {
      const next = this.waiting.shift()
      if (next) next() // the place passes straight to the next in line
      else this.active--
    }
  }
}
