/** Errors the summarizers raise, with their statuses; they know nothing of the service or the HTTP layer. */
import { GatewayError } from '../contract/errors.js'

/** The operator chose no fallback (COMPACT_FALLBACK=error) and the model summary failed. */
export class SummarizerFailedError extends GatewayError {
  constructor(
    readonly reason: string,
    options?: { cause?: unknown }
  ) {
    super(502, `the summarizer failed (${reason}) and COMPACT_FALLBACK=error forbids the extractive fallback`, { cause: options?.cause })
  }
}

/** Too many summaries in flight and queued: the client should retry after `retryAfterS` seconds. */
export class OverloadedError extends GatewayError {
  constructor(
    detail: string,
    readonly retryAfterS: number
  ) {
    super(503, `the service is overloaded (${detail}); retry after ${retryAfterS} s`, { headers: { 'retry-after': String(retryAfterS) } })
  }
}
