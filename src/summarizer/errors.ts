/** Errors the summarizers raise, each of a kind the contract gives its status (ERROR_KINDS); they know nothing of the service. */
import { GatewayError } from '../contract/errors.js'

/** Why a model summary failed where a retry of the same request would meet the same failure. */
const LASTING = new Set(['no_api_key', 'auth_error', 'bad_request', 'refusal', 'no_tool_call', 'invalid_output'])

/**
 * The operator chose no fallback (COMPACT_FALLBACK=error) and the model summary failed. The SDKs retry a
 * 502 on their own: `x-should-retry: false` tells them not to where the failure would come again.
 */
export class SummarizerFailedError extends GatewayError {
  constructor(
    readonly reason: string,
    options?: { cause?: unknown }
  ) {
    super('upstream_failed', `the summarizer failed (${reason}) and COMPACT_FALLBACK=error forbids the extractive fallback`, {
      cause: options?.cause,
      headers: { 'x-should-retry': LASTING.has(reason) ? 'false' : 'true' }
    })
  }
}

/** Every caller of a summary that had not begun went away: its queue place is given up (nginx's 499). */
export class CancelledError extends GatewayError {
  constructor(detail: string) {
    super('cancelled', `the request was cancelled: ${detail}`)
  }
}

/** Too many summaries in flight and queued: the client should retry after `retryAfterS` seconds. */
export class OverloadedError extends GatewayError {
  constructor(
    detail: string,
    readonly retryAfterS: number
  ) {
    super('overloaded', `the service is overloaded (${detail}); retry after ${retryAfterS} s`, { headers: { 'retry-after': String(retryAfterS) } })
  }
}
