import Anthropic from '@anthropic-ai/sdk'
import { AnthropicSummarizer } from './anthropic.js'
import { ResilientSummarizer } from './resilient.js'
import type { Summarizer } from './summarizer.js'

/** Retries the SDK makes on 429, 5xx and 529 (honouring Retry-After): the one retry loop for those. */
export const SDK_MAX_RETRIES = 2

/** What the model summarizer is built from (the server's configuration has these names). */
export interface ModelSettings {
  ANTHROPIC_API_KEY?: string | undefined
  ANTHROPIC_BASE_URL?: string | undefined
  COMPACT_MODEL: string
  COMPACT_SUMMARIZER_TIMEOUT_MS: number
  COMPACT_SUMMARIZER_INPUT_TOKENS: number
  COMPACT_FALLBACK: 'extractive' | 'error'
}

/**
 * The model summarizer the configuration asks for, behind the fallback: none without an API key.
 * `model` replaces the Anthropic one (tests wrap their own in the same fallback).
 */
export function modelSummarizer(config: ModelSettings, model?: Summarizer): Summarizer | undefined {
  const options = { timeoutMs: config.COMPACT_SUMMARIZER_TIMEOUT_MS, fallback: config.COMPACT_FALLBACK }
  if (model) return new ResilientSummarizer(model, options)
  if (!config.ANTHROPIC_API_KEY) return undefined
  const client = new Anthropic({
    apiKey: config.ANTHROPIC_API_KEY,
    ...(config.ANTHROPIC_BASE_URL ? { baseURL: config.ANTHROPIC_BASE_URL } : {}),
    maxRetries: SDK_MAX_RETRIES,
    timeout: config.COMPACT_SUMMARIZER_TIMEOUT_MS
  })
  return new ResilientSummarizer(
    new AnthropicSummarizer({ client, model: config.COMPACT_MODEL, inputBudgetTokens: config.COMPACT_SUMMARIZER_INPUT_TOKENS }),
    options
  )
}
