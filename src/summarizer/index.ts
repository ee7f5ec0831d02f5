import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { AnthropicSummarizer } from './anthropic.js'
import { OpenAiSummarizer } from './openai.js'
import { ResilientSummarizer } from './resilient.js'
import type { Summarizer } from './summarizer.js'

/** Retries the SDK makes on 429, 5xx and 529 (honouring Retry-After): the one retry loop for those. */
export const SDK_MAX_RETRIES = 2

/** What the model summarizer is built from (the server's configuration has these names). */
export interface ModelSettings {
  COMPACT_SUMMARIZER: 'auto' | 'anthropic' | 'openai' | 'gemini' | 'extractive'
  ANTHROPIC_API_KEY?: string | undefined
  ANTHROPIC_BASE_URL?: string | undefined
  OPENAI_API_KEY?: string | undefined
  OPENAI_BASE_URL?: string | undefined
  GEMINI_API_KEY?: string | undefined
  GOOGLE_GEMINI_BASE_URL?: string | undefined
  COMPACT_MODEL: string
  COMPACT_FOLD_MODEL?: string | undefined
  COMPACT_SUMMARIZER_TIMEOUT_MS: number
  COMPACT_SUMMARIZER_INPUT_TOKENS: number
  COMPACT_FALLBACK: 'extractive' | 'error'
}

export type ModelKind = 'anthropic' | 'openai' | 'gemini'

/** Which summarizer the settings make: `auto` is Anthropic's where there is its key, else the extractive one. */
export function summarizerKind(config: Pick<ModelSettings, 'COMPACT_SUMMARIZER' | 'ANTHROPIC_API_KEY'>): ModelKind | 'extractive' {
  if (config.COMPACT_SUMMARIZER === 'auto') return config.ANTHROPIC_API_KEY ? 'anthropic' : 'extractive'
  return config.COMPACT_SUMMARIZER
}

/** What keeps the chosen summarizer from being made, in words, or undefined. */
export function summarizerProblem(config: ModelSettings): string | undefined {
  if (config.COMPACT_SUMMARIZER === 'anthropic' && !config.ANTHROPIC_API_KEY) return 'COMPACT_SUMMARIZER=anthropic needs ANTHROPIC_API_KEY'
  // a server of one's own (vLLM, Ollama) may take no key; OpenAI's own API always does
  if (config.COMPACT_SUMMARIZER === 'openai' && !config.OPENAI_API_KEY && !config.OPENAI_BASE_URL) {
    return 'COMPACT_SUMMARIZER=openai needs OPENAI_API_KEY, or OPENAI_BASE_URL for a server that takes none'
  }
  if (config.COMPACT_SUMMARIZER === 'gemini' && !config.GEMINI_API_KEY) return 'COMPACT_SUMMARIZER=gemini needs GEMINI_API_KEY'
  return undefined
}

/**
 * The model summarizer the configuration asks for, behind the fallback: none for the extractive one.
 * `model` replaces it (tests wrap their own in the same fallback). Google's SDK is loaded only for a Gemini
 * summarizer: it and what it brings (an auth library, a WebSocket client) are otherwise loaded at every start for nothing.
 */
export async function modelSummarizer(config: ModelSettings, model?: Summarizer): Promise<Summarizer | undefined> {
  const options = { timeoutMs: config.COMPACT_SUMMARIZER_TIMEOUT_MS, fallback: config.COMPACT_FALLBACK }
  if (model) return new ResilientSummarizer(model, options)
  const kind = summarizerKind(config)
  const common = {
    model: config.COMPACT_MODEL,
    ...(config.COMPACT_FOLD_MODEL ? { foldModel: config.COMPACT_FOLD_MODEL } : {}),
    inputBudgetTokens: config.COMPACT_SUMMARIZER_INPUT_TOKENS
  }
  const client = { maxRetries: SDK_MAX_RETRIES, timeout: config.COMPACT_SUMMARIZER_TIMEOUT_MS }
  if (kind === 'anthropic' && config.ANTHROPIC_API_KEY) {
    const anthropic = new Anthropic({
      apiKey: config.ANTHROPIC_API_KEY,
      ...(config.ANTHROPIC_BASE_URL ? { baseURL: config.ANTHROPIC_BASE_URL } : {}),
      ...client
    })
    return new ResilientSummarizer(new AnthropicSummarizer({ client: anthropic, ...common }), options)
  }
  if (kind === 'openai') {
    // the base URL as the SDK reads it (`/v1` included); a server that takes no key is sent a placeholder
    const openai = new OpenAI({ apiKey: config.OPENAI_API_KEY ?? 'none', ...(config.OPENAI_BASE_URL ? { baseURL: config.OPENAI_BASE_URL } : {}), ...client })
    return new ResilientSummarizer(new OpenAiSummarizer({ client: openai, ...common }), options)
  }
  if (kind === 'gemini' && config.GEMINI_API_KEY) {
    const [{ GoogleGenAI }, { GeminiSummarizer }] = await Promise.all([import('@google/genai'), import('./gemini.js')])
    // Google's SDK retries 429 and 5xx itself: as many attempts as the other SDKs make
    const gemini = new GoogleGenAI({
      apiKey: config.GEMINI_API_KEY,
      httpOptions: {
        timeout: config.COMPACT_SUMMARIZER_TIMEOUT_MS,
        retryOptions: { attempts: SDK_MAX_RETRIES + 1 },
        ...(config.GOOGLE_GEMINI_BASE_URL ? { baseUrl: config.GOOGLE_GEMINI_BASE_URL } : {})
      }
    })
    return new ResilientSummarizer(new GeminiSummarizer({ client: gemini, ...common }), options)
  }
  return undefined
}
