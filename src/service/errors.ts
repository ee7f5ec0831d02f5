import type { HistoryProblem } from '../compaction/index.js'
import { GatewayError } from '../contract/errors.js'

/** The history breaks a rule: 400 for a block's shape, 422 for the rules of a conversation; the path names the place. */
export class InvalidHistoryError extends GatewayError {
  constructor(readonly problem: HistoryProblem) {
    super(problem.kind === 'shape' ? 'invalid_request' : 'invalid_history', problem.message, { path: problem.path })
  }
}

/** A request asked for a summarizer the server does not have. */
export class SummarizerUnavailableError extends GatewayError {
  constructor(
    readonly requested: string,
    configured?: string
  ) {
    const how = requested === 'openai' ? 'COMPACT_SUMMARIZER=openai with OPENAI_API_KEY or OPENAI_BASE_URL' : 'ANTHROPIC_API_KEY'
    super(
      'invalid_request',
      `summarizer "${requested}" is not configured on this server (${configured ? `its model summarizer is ${configured}` : `set ${how} to enable it`})`,
      { path: '/summarizer' }
    )
  }
}

/** The summarizer's own errors, which the HTTP layer maps to 502 and 503. */
