import Anthropic from '@anthropic-ai/sdk'

/** Why a model summary could not be had; the response names it in `summarizer.fallback_reason`. */
export type FaultReason =
  | 'no_api_key'
  | 'timeout'
  | 'rate_limited'
  | 'overloaded'
  | 'server_error'
  | 'connection_error'
  | 'auth_error'
  | 'bad_request'
  | 'refusal'
  | 'no_tool_call'
  | 'invalid_output'
  | 'cancelled'

export class SummarizerFault extends Error {
  constructor(
    readonly reason: FaultReason,
    message: string,
    options?: { cause?: unknown }
  ) {
    super(message, options)
    this.name = 'SummarizerFault'
  }
}

/** Names what went wrong in an SDK error (after the SDK's own retries). */
export function faultOf(err: unknown): SummarizerFault {
  if (err instanceof SummarizerFault) return err
  const message = err instanceof Error ? err.message : String(err)
  if (err instanceof Anthropic.APIConnectionTimeoutError) return new SummarizerFault('timeout', message, { cause: err })
  if (err instanceof Anthropic.APIUserAbortError) return new SummarizerFault('cancelled', message, { cause: err })
  if (err instanceof Anthropic.APIConnectionError) return new SummarizerFault('connection_error', message, { cause: err })
  if (err instanceof Anthropic.RateLimitError) return new SummarizerFault('rate_limited', message, { cause: err })
  if (err instanceof Anthropic.AuthenticationError || err instanceof Anthropic.PermissionDeniedError) {
    return new SummarizerFault('auth_error', message, { cause: err })
  }
  if (err instanceof Anthropic.APIError) {
    if (err.status === 529) return new SummarizerFault('overloaded', message, { cause: err })
    if (typeof err.status === 'number' && err.status >= 500) return new SummarizerFault('server_error', message, { cause: err })
    return new SummarizerFault('bad_request', message, { cause: err })
  }
  return new SummarizerFault('server_error', message, { cause: err })
}
