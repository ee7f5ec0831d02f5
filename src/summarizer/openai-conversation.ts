import type OpenAI from 'openai'
import { type ForwardedItems, askAfter, judgeAnswer } from './conversation.js'
import { maxOutputTokens } from './fold.js'
import { SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'

/** The OpenAI conversation a summary is written in: the client's own request, as the upstream last received it. */
export interface OpenAiConversation {
  api: 'chat' | 'responses'
  /**
   * The body forwarded upstream (parsed), read once the client's request has been answered, and the index,
   * in its `messages` or `input`, of the item each of the core's messages starts at.
   */
  forwarded: () => ForwardedItems | undefined
  /** An OpenAI client with the client's own credentials and the proxy's upstream. */
  client: OpenAI
  /** Settles when the client's own request has been answered (its prefix is then in the upstream's cache). */
  after?: Promise<unknown>
}

/** Fields of a request that only a streamed answer reads. */
const STREAM_ONLY = ['stream', 'stream_options'] as const

/**
 * A summary written by the client's own model in the client's own Chat Completions or Responses
 * conversation: the body it last forwarded (model, instructions, tools, settings and items, as sent) with
 * the doctrine appended as one more user message. The upstream caches prompt prefixes, and that prefix
 * is the one the client's own request has just put in its cache: the call pays cached input for the
 * conversation and full price for the instruction and the answer only. Nothing of the prefix is changed
 * (no tool, tool choice or reasoning setting: each would change the prompt the cache is keyed on). The
 * answer is the sections as JSON, read and checked as the tool's input is; one retry with what was
 * wrong, then the fault, which the fallback turns into the extractive summary.
 */
export class OpenAiConversationSummarizer implements Summarizer {
  readonly kind = 'openai' as const

  constructor(
    private readonly conversation: OpenAiConversation,
    readonly model: string
  ) {}

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const started = performance.now()
    await this.conversation.after
    const { api, client } = this.conversation
    const field = api === 'chat' ? 'messages' : 'input'
    const { body: sent, items, instruction, summaryBudget } = askAfter(request, this.conversation.forwarded(), field)
    const { signal } = request
    const usage = { input: 0, cached: 0, output: 0, calls: 0 }
    let added: Record<string, unknown>[] = [{ role: 'user', content: instruction }]
    for (let attempt = 0; ; attempt++) {
      const body: Record<string, unknown> = { ...sent, [field]: [...items, ...added] }
      for (const name of STREAM_ONLY) delete body[name]
      if (api === 'responses') body.store = false
      else if (body.max_tokens === undefined && body.max_completion_tokens === undefined) body.max_tokens = maxOutputTokens(summaryBudget)
      if (api === 'responses' && body.max_output_tokens === undefined) body.max_output_tokens = maxOutputTokens(summaryBudget)
      let text: string
      let calledTool: boolean
      try {
        if (api === 'chat') {
          const answer = (await client.chat.completions.create(
            { ...body, stream: false } as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming,
            { signal }
          )) as OpenAI.Chat.Completions.ChatCompletion
          usage.input += answer.usage?.prompt_tokens ?? 0
          usage.cached += answer.usage?.prompt_tokens_details?.cached_tokens ?? 0
          usage.output += answer.usage?.completion_tokens ?? 0
          const message = answer.choices[0]?.message
          if (message?.refusal) throw new SummarizerFault('refusal', message.refusal)
          text = message?.content ?? ''
          calledTool = (message?.tool_calls?.length ?? 0) > 0
        } else {
          const answer = (await client.responses.create({ ...body, stream: false } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming, {
            signal
          })) as OpenAI.Responses.Response
          usage.input += answer.usage?.input_tokens ?? 0
          usage.cached += answer.usage?.input_tokens_details?.cached_tokens ?? 0
          usage.output += answer.usage?.output_tokens ?? 0
          const parts = answer.output.flatMap((item) => (item.type === 'message' ? item.content : []))
          const refusal = parts.find((p) => p.type === 'refusal')
          if (refusal && refusal.type === 'refusal') throw new SummarizerFault('refusal', refusal.refusal)
          text = parts.map((p) => (p.type === 'output_text' ? p.text : '')).join('\n')
          calledTool = answer.output.some((item) => item.type === 'function_call' || item.type === 'custom_tool_call')
        }
      } catch (err) {
        throw faultOf(err)
      }
      usage.calls++
      const judged = judgeAnswer(text, attempt, calledTool, { kind: 'openai', model: this.model, usage, started })
      if ('result' in judged) return judged.result
      // The retry goes on in the same conversation: its prefix, the first attempt included, is read from cache.
      added = [...added, { role: 'assistant', content: text }, { role: 'user', content: judged.retry }]
    }
  }
}
