import { type ForwardedItems, askAfter, judgeAnswer } from './conversation.js'
import { maxOutputTokens } from './fold.js'
import { SummarizerFault } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'

/** The Gemini conversation a summary is written in: the client's own request, as the upstream last received it. */
export interface GeminiConversation {
  /**
   * The body forwarded upstream (parsed), read once the client's request has been answered, and the index,
   * in its `contents`, of the content each of the core's messages starts at.
   */
  forwarded: () => ForwardedItems | undefined
  /** Where `generateContent` of the conversation's model is (its upstream, the model in the path). */
  url: string
  /** The headers the conversation is forwarded with (its key among them). */
  headers: Record<string, string>
  /** The whole call ends within this. */
  timeoutMs: number
  /** Settles when the client's own request has been answered (its prefix is then in the upstream's cache). */
  after?: Promise<unknown>
}

/** Headers the call writes itself. */
const OWN = new Set(['content-type', 'content-length', 'accept', 'accept-encoding', 'host', 'connection'])

interface GeminiAnswer {
  candidates?: { content?: { parts?: { text?: string; thought?: boolean; functionCall?: unknown }[] }; finishReason?: string }[]
  promptFeedback?: { blockReason?: string }
  usageMetadata?: { promptTokenCount?: number; cachedContentTokenCount?: number; candidatesTokenCount?: number; thoughtsTokenCount?: number }
}

/**
 * A summary written by the conversation's own Gemini model in the conversation itself: the body it was last
 * forwarded as (its system instruction, tools, settings and contents, as sent) with the doctrine as one more
 * user content, sent to the same model's `generateContent`. Gemini caches a repeated prompt prefix by itself
 * (implicit caching) and that prefix is the one the client's own request has just sent: nothing of it is
 * changed. The answer is the sections as JSON, read and checked as the tool's input is; one retry in the same
 * conversation with what was wrong, then the fault (the fallback makes it the extractive summary).
 */
export class GeminiConversationSummarizer implements Summarizer {
  readonly kind = 'gemini' as const

  constructor(
    private readonly conversation: GeminiConversation,
    readonly model: string
  ) {}

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const started = performance.now()
    await this.conversation.after
    const { body: sent, items: contents, instruction, summaryBudget } = askAfter(request, this.conversation.forwarded(), 'contents')
    const { signal } = request
    const usage = { input: 0, output: 0, calls: 0 }
    let added: Record<string, unknown>[] = [{ role: 'user', parts: [{ text: instruction }] }]
    for (let attempt = 0; ; attempt++) {
      const settings = (sent.generationConfig ?? {}) as Record<string, unknown>
      const body = {
        ...sent,
        contents: [...contents, ...added],
        // room for the answer where the client set none (its own setting kept: it is not part of the cached prefix)
        generationConfig: settings.maxOutputTokens === undefined ? { ...settings, maxOutputTokens: maxOutputTokens(summaryBudget) } : settings
      }
      const answer = await this.call(body, signal)
      usage.calls++
      usage.input += answer.usageMetadata?.promptTokenCount ?? 0
      usage.output += (answer.usageMetadata?.candidatesTokenCount ?? 0) + (answer.usageMetadata?.thoughtsTokenCount ?? 0)
      const candidate = answer.candidates?.[0]
      if (!candidate)
        throw new SummarizerFault(
          answer.promptFeedback?.blockReason ? 'refusal' : 'invalid_output',
          answer.promptFeedback?.blockReason ? `the prompt was blocked: ${answer.promptFeedback.blockReason}` : 'the answer had no candidate'
        )
      if (candidate.finishReason === 'SAFETY' || candidate.finishReason === 'RECITATION' || candidate.finishReason === 'PROHIBITED_CONTENT')
        throw new SummarizerFault('refusal', `the answer was stopped: ${candidate.finishReason}`)
      const parts = candidate.content?.parts ?? []
      const text = parts
        .filter((p) => p.thought !== true && typeof p.text === 'string')
        .map((p) => p.text)
        .join('')
      const calledTool = parts.some((p) => p.functionCall !== undefined)
      const judged = judgeAnswer(text, attempt, calledTool, { kind: 'gemini', model: this.model, usage, started })
      if ('result' in judged) return judged.result
      // the retry goes on in the same conversation (the model's content as it came, thought signatures with it)
      added = [...added, { role: 'model', parts }, { role: 'user', parts: [{ text: judged.retry }] }]
    }
  }

  /** One `generateContent` call; what went wrong named as the other summarizers name it. */
  private async call(body: Record<string, unknown>, signal: AbortSignal | undefined): Promise<GeminiAnswer> {
    const { url, headers, timeoutMs } = this.conversation
    const own = Object.fromEntries(Object.entries(headers).filter(([name]) => !OWN.has(name.toLowerCase())))
    const timeout = AbortSignal.timeout(timeoutMs)
    let res: Response
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { ...own, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout
      })
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      if (timeout.aborted) throw new SummarizerFault('timeout', message, { cause: err })
      if (signal?.aborted) throw new SummarizerFault('cancelled', message, { cause: err })
      throw new SummarizerFault('connection_error', message, { cause: err })
    }
    const text = await res.text().catch(() => '')
    if (!res.ok) {
      const message = `Gemini's API answered ${res.status}: ${text.slice(0, 300)}`
      if (res.status === 429) throw new SummarizerFault('rate_limited', message)
      if (res.status === 401 || res.status === 403) throw new SummarizerFault('auth_error', message)
      if (res.status === 503) throw new SummarizerFault('overloaded', message)
      throw new SummarizerFault(res.status >= 500 ? 'server_error' : 'bad_request', message)
    }
    try {
      return JSON.parse(text) as GeminiAnswer
    } catch {
      throw new SummarizerFault('invalid_output', "Gemini's answer is not JSON")
    }
  }
}
