import { SummarizerFailedError } from './errors.js'
import { extractiveReport } from './extractive.js'
import { type FaultReason, SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'

export interface ResilientOptions {
  /** The whole model summary, all calls and the SDK's retries included, must end within this. */
  timeoutMs: number
  /** `extractive`: a fault falls back to the extractive summary; `error`: it becomes a 502. */
  fallback: 'extractive' | 'error'
}

/**
 * A model summarizer that never loses a compaction: past its deadline, or on any fault, the extractive
 * summary stands in and the response says why. With COMPACT_FALLBACK=error the fault is raised instead.
 */
export class ResilientSummarizer implements Summarizer {
  readonly kind: Summarizer['kind']

  constructor(
    private readonly model: Summarizer,
    private readonly options: ResilientOptions
  ) {
    this.kind = model.kind
  }

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const started = performance.now()
    const controller = new AbortController()
    const onAbort = (): void => controller.abort(request.signal?.reason)
    request.signal?.addEventListener('abort', onAbort, { once: true })
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const fault = new SummarizerFault('timeout', `no model summary within ${this.options.timeoutMs} ms`)
        controller.abort(fault)
        reject(fault)
      }, this.options.timeoutMs)
    })
    const work = this.model.summarize({ ...request, signal: controller.signal })
    work.catch(() => undefined) // settled by the race below; a late rejection is not unhandled
    try {
      return await Promise.race([work, deadline])
    } catch (err) {
      const fault = controller.signal.reason instanceof SummarizerFault ? controller.signal.reason : faultOf(err)
      return this.fallBack(fault.reason, performance.now() - started, fault)
    } finally {
      clearTimeout(timer)
      request.signal?.removeEventListener('abort', onAbort)
    }
  }

  private fallBack(reason: FaultReason, durationMs: number, cause: unknown): SummarizeResult {
    if (this.options.fallback === 'error') throw new SummarizerFailedError(reason, { cause })
    return { report: extractiveReport(reason, Math.round(durationMs)) }
  }
}
