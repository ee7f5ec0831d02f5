import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { FAULT_REASONS } from '../contract/schemas.js'

/** Why a model summary could not be had; the response names it in `summarizer.fallback_reason` (the contract's list). */
export type FaultReason = (typeof FAULT_REASONS)[number]

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

/** The two SDKs' error classes, which have the same names and meanings. */
const SDKS = [Anthropic, OpenAI] as const

/** Names what went wrong in an SDK error, Anthropic's or OpenAI's (after the SDK's own retries). */
export function faultOf(err: unknown): SummarizerFault {
  if (err instanceof SummarizerFault) return err
  const message = err instanceof Error ? err.message : String(err)
  const is = (
    name:
      'APIConnectionTimeoutError' | 'APIUserAbortError' | 'APIConnectionError' | 'RateLimitError' | 'AuthenticationError' | 'PermissionDeniedError' | 'APIError'
  ): boolean => SDKS.some((sdk) => err instanceof sdk[name])
  if (is('APIConnectionTimeoutError')) return new SummarizerFault('timeout', message, { cause: err })
  if (is('APIUserAbortError')) return new SummarizerFault('cancelled', message, { cause: err })
  if (is('APIConnectionError')) return new SummarizerFault('connection_error', message, { cause: err })
  if (is('RateLimitError')) return new SummarizerFault('rate_limited', message, { cause: err })
  if (is('AuthenticationError') || is('PermissionDeniedError')) return new SummarizerFault('auth_error', message, { cause: err })
  if (is('APIError')) {
    const status = (err as { status?: unknown }).status
    if (status === 529) return new SummarizerFault('overloaded', message, { cause: err })
    if (typeof status === 'number' && status >= 500) return new SummarizerFault('server_error', message, { cause: err })
    return new SummarizerFault('bad_request', message, { cause: err })
  }
  return new SummarizerFault('server_error', message, { cause: err })
}
