import type { CompactionPlan, SummarySections } from '../compaction/index.js'

export type SummarizerKind = 'anthropic' | 'extractive' | 'cache'

/** What the response says of the summarizer that wrote the summary (DESIGN 3). */
export interface SummarizerReport {
  kind: SummarizerKind
  model: string | null
  input_tokens: number
  output_tokens: number
  calls: number
  /** Why a model summary was not used, when the extractive one stands in for it. */
  fallback_reason: string | null
  duration_ms: number
}

export interface SummarizeRequest {
  plan: CompactionPlan
  /** The user's focus for this compaction; added to the doctrine, never replacing it. */
  instructions?: string
  /** Whose request this is (the API key's name); cached summaries are never shared across tenants. */
  tenant?: string
  signal?: AbortSignal
}

export interface SummarizeResult {
  /** Sections a model wrote; undefined means "build the extractive summary from the ledger". */
  sections?: SummarySections
  report: SummarizerReport
}

/** One interface for every way of writing a summary. */
export interface Summarizer {
  readonly kind: SummarizerKind
  summarize(request: SummarizeRequest): Promise<SummarizeResult>
}
