import type { FaultReason } from './faults.js'
import type { SummarizeResult, Summarizer } from './summarizer.js'

/**
 * The summarizer that needs nothing: the core builds the summary from the ledger, the prior summary and
 * the latest assistant text. It is the default without an API key, and the fallback for every fault.
 */
export class ExtractiveSummarizer implements Summarizer {
  readonly kind = 'extractive' as const

  async summarize(): Promise<SummarizeResult> {
    return { report: extractiveReport(null, 0) }
  }
}

export function extractiveReport(fallbackReason: FaultReason | null, durationMs: number): SummarizeResult['report'] {
  return { kind: 'extractive', model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: fallbackReason, duration_ms: durationMs }
}
