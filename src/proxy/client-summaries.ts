import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { Message } from '../compaction/index.js'
import { topLevelField } from './events.js'
import { ConversationSummarizer } from '../summarizer/conversation.js'
import { type OpenAiConversation, OpenAiConversationSummarizer } from '../summarizer/openai-conversation.js'
import { type GeminiConversation, GeminiConversationSummarizer } from '../summarizer/gemini-conversation.js'
import { SDK_MAX_RETRIES } from '../summarizer/index.js'
import { ResilientSummarizer } from '../summarizer/resilient.js'
import type { Summarizer } from '../summarizer/summarizer.js'

/** How a proxied conversation's summaries are written by its own model, in the conversation (COMPACT_PROXY_SUMMARIES). */
export interface ClientSummaries {
  /** The Messages API the proxy forwards to (the base URL, as the SDK takes it). */
  baseUrl: string
  /** The OpenAI-compatible API the proxy forwards to. */
  openAiBaseUrl: string
  /** Gemini's API the proxy forwards to. */
  geminiBaseUrl: string
  /** The whole summary, retry included, ends within this; then the fallback. */
  timeoutMs: number
  fallback: 'extractive' | 'error'
}

/** Headers the SDK writes itself from the body it sends. */
const SDK_OWN = new Set(['content-type', 'content-length', 'accept', 'accept-encoding'])

/**
 * The summarizer of one proxied conversation, made from its request: the client's body but for its messages,
 * the headers it is forwarded with (the credentials it goes with, anthropic-version and -beta), and the messages as
 * they are forwarded. `after` settles once the upstream has begun to answer the forwarded request, whose
 * prefix is then in its cache: the summary call waits for it, so that it reads that prefix.
 */
export function clientSummarizer(
  settings: ClientSummaries,
  body: Record<string, unknown>,
  headers: Record<string, string>,
  after: Promise<unknown>,
  /** The request as it was forwarded, once it was: its tools (the gateway's recall tool among them) are the summary call's. */
  forwarded?: () => Buffer | undefined
): (messages: Message[]) => Summarizer {
  const { messages: _sent, stream: _stream, ...asked } = body
  const own = Object.fromEntries(Object.entries(headers).filter(([name]) => !SDK_OWN.has(name.toLowerCase())))
  return (messages) => {
    // read when the summary call is made (after the client's request has gone): its tools as they went
    const request = forwarded ? withToolsAsSent(asked, forwarded) : asked
    const client = new Anthropic({
      apiKey: null,
      authToken: null,
      baseURL: settings.baseUrl,
      defaultHeaders: own,
      maxRetries: SDK_MAX_RETRIES,
      timeout: settings.timeoutMs
    })
    return new ResilientSummarizer(new ConversationSummarizer({ request, messages, client, after }), {
      timeoutMs: settings.timeoutMs,
      fallback: settings.fallback
    })
  }
}

/**
 * The summarizer of one proxied Chat Completions or Responses conversation: the body it was forwarded
 * with (`forwarded`, read once the upstream has begun to answer it), the credentials and headers it is
 * forwarded with, its model.
 */
export function openAiClientSummarizer(
  settings: ClientSummaries,
  conversation: Omit<OpenAiConversation, 'client'>,
  model: string,
  headers: Record<string, string>
): (messages: Message[]) => Summarizer {
  const baseURL = settings.openAiBaseUrl
  const own = Object.fromEntries(Object.entries(headers).filter(([name]) => !SDK_OWN.has(name.toLowerCase()) && name.toLowerCase() !== 'authorization'))
  const bearer = /^Bearer\s+(.+)$/i.exec(Object.entries(headers).find(([name]) => name.toLowerCase() === 'authorization')?.[1] ?? '')?.[1]
  return () => {
    // (a client that sends no key, as to a local server, is sent on with none)
    const client = new OpenAI({
      apiKey: bearer ?? 'none',
      baseURL,
      defaultHeaders: bearer ? own : { ...own, authorization: null },
      maxRetries: SDK_MAX_RETRIES,
      timeout: settings.timeoutMs
    })
    return new ResilientSummarizer(new OpenAiConversationSummarizer({ ...conversation, client }, model), {
      timeoutMs: settings.timeoutMs,
      fallback: settings.fallback
    })
  }
}

/**
 * The summarizer of one proxied Gemini conversation: the body it was forwarded with (`forwarded`, read once
 * the upstream has begun to answer it), the credentials and headers it is forwarded with, its model.
 */
export function geminiClientSummarizer(
  settings: ClientSummaries,
  conversation: Pick<GeminiConversation, 'forwarded' | 'after'>,
  model: string,
  headers: Record<string, string>
): (messages: Message[]) => Summarizer {
  const url = `${settings.geminiBaseUrl.replace(/\/+$/, '')}/v1beta/models/${encodeURIComponent(model)}:generateContent`
  return () =>
    new ResilientSummarizer(new GeminiConversationSummarizer({ ...conversation, url, headers, timeoutMs: settings.timeoutMs }, model), {
      timeoutMs: settings.timeoutMs,
      fallback: settings.fallback
    })
}

/** The request with its `tools` read from the forwarded bytes when it is read (at the summary call), where they were forwarded. */
function withToolsAsSent(asked: Record<string, unknown>, forwarded: () => Buffer | undefined): Record<string, unknown> {
  const out = { ...asked }
  let tools: unknown = asked.tools
  let read = false
  Object.defineProperty(out, 'tools', {
    enumerable: true,
    get: () => {
      const sent = read ? undefined : forwarded()
      if (sent) {
        read = true
        const field = topLevelField(sent, 'tools')
        tools = field ? (JSON.parse(field.value.toString('utf8')) as unknown) : asked.tools
      }
      return tools
    }
  })
  return out
}
