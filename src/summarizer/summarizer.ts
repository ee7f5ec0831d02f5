import type { CompactionPlan, Redactors, SummarySections } from '../compaction/index.js'
import type { SummarizerReportBody } from '../contract/schemas.js'

/** What the response says of the summarizer that wrote the summary: the contract's type, one definition. */
export type SummarizerReport = SummarizerReportBody

export type SummarizerKind = SummarizerReport['kind']

export interface SummarizeRequest {
  plan: CompactionPlan
  /** The redaction of everything the summarizer sends, or keeps of a model's answer: the plan's compaction's. */
  redactors: Redactors
  /** The user's focus for this compaction; added to the doctrine, never replacing it. */
  instructions?: string
  /** Whose request this is (the API key's name); cached summaries are never shared across tenants. */
  keyName?: string
  /** The client's session, whose deletion deletes the summary cached for it. */
  session?: string
  signal?: AbortSignal
  /**
   * Aborted when no caller waits for this summary any more: a summary not begun yet gives up its queue
   * place then (one begun goes on where `signal` is absent, so that a retry finds it done).
   */
  queueSignal?: AbortSignal
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
