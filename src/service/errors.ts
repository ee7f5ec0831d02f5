import type { HistoryProblem } from '../compaction/index.js'

/** Domain errors the HTTP layer maps to statuses; the core and the summarizers never import Fastify. */
export class InvalidHistoryError extends Error {
  constructor(readonly problem: HistoryProblem) {
    super(problem.message)
    this.name = 'InvalidHistoryError'
  }
}

/** The operator chose no fallback (COMPACT_FALLBACK=error) and the model summary failed. */
export class SummarizerFailedError extends Error {
  constructor(
    readonly reason: string,
    options?: { cause?: unknown }
  ) {
    super(`the summarizer failed (${reason}) and COMPACT_FALLBACK=error forbids the extractive fallback`, options)
    this.name = 'SummarizerFailedError'
  }
}

/** A request asked for a summarizer the server does not have. */
export class SummarizerUnavailableError extends Error {
  constructor(readonly requested: string) {
    super(`summarizer "${requested}" is not configured on this server (set ANTHROPIC_API_KEY to enable it)`)
    this.name = 'SummarizerUnavailableError'
  }
}

/** Too many summaries in flight and queued: the client should retry after `retryAfterS` seconds. */
export class OverloadedError extends Error {
  constructor(
    detail: string,
    readonly retryAfterS: number
  ) {
    super(`the service is overloaded (${detail}); retry after ${retryAfterS} s`)
    this.name = 'OverloadedError'
  }
}
