import type OpenAI from 'openai'
import type { SummarySections } from '../compaction/index.js'
import { DOCTRINE_TEXT } from '../prompts/doctrine.js'
import { type SummaryCall, maxOutputTokens, modelSummary } from './fold.js'
import { SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'
import { SUMMARY_TOOL_NAME, readToolInput, summaryTool } from './tool.js'

export interface OpenAiSummarizerOptions {
  client: OpenAI
  model: string
  /** The model that folds the earlier parts of a span too long for one call; `model` when absent. */
  foldModel?: string
  /** Most input tokens one call may take: doctrine, tool, prior summary, instructions and transcript. */
  inputBudgetTokens: number
}

/** The summary tool as a Chat Completions function (the same schema as Anthropic's tool input). */
const summaryFunction: OpenAI.Chat.Completions.ChatCompletionFunctionTool = {
  type: 'function',
  function: { name: SUMMARY_TOOL_NAME, description: summaryTool.description, parameters: summaryTool.input_schema }
}

/**
 * Summarizes through any OpenAI-compatible Chat Completions server (OpenAI, vLLM, Ollama, LiteLLM,
 * Fireworks, OpenRouter) under the same doctrine, prompt and folding as the Anthropic summarizer: the
 * doctrine as the system message, a forced function call whose arguments are the sections. An answer
 * that is not a valid call is retried once with what was wrong; the SDK alone retries 429 and 5xx.
 */
export class OpenAiSummarizer implements Summarizer {
  readonly kind = 'openai' as const
  readonly model: string

  constructor(private readonly options: OpenAiSummarizerOptions) {
    this.model = options.model
  }

  summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    return modelSummary('openai', request, this.options, this.call)
  }

  private readonly call: SummaryCall = async ({ prompt, summaryBudget, model, usage, signal }): Promise<SummarySections> => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'system', content: DOCTRINE_TEXT },
      { role: 'user', content: prompt }
    ]
    for (let attempt = 0; ; attempt++) {
      let response: OpenAI.Chat.Completions.ChatCompletion
      try {
        response = await this.options.client.chat.completions.create(
          {
            model,
            // max_tokens, not max_completion_tokens: the compatible servers (vLLM, Ollama, LiteLLM) all read it
            max_tokens: maxOutputTokens(summaryBudget),
            tools: [summaryFunction],
            tool_choice: { type: 'function', function: { name: SUMMARY_TOOL_NAME } },
            messages
          },
          { signal }
        )
      } catch (err) {
        throw faultOf(err)
      }
      usage.calls++
      usage.input += response.usage?.prompt_tokens ?? 0
      usage.output += response.usage?.completion_tokens ?? 0
      const choice = response.choices[0]
      const message = choice?.message
      if (!choice || !message) throw new SummarizerFault('invalid_output', 'the answer had no choice')
      if (message.refusal || choice.finish_reason === 'content_filter') throw new SummarizerFault('refusal', message.refusal ?? 'the answer was filtered')

      const use = message.tool_calls?.find(
        (c): c is OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall => c.type === 'function' && c.function.name === SUMMARY_TOOL_NAME
      )
      const read = use ? readArguments(use.function.arguments) : { error: `the answer did not call ${SUMMARY_TOOL_NAME}` }
      if ('sections' in read) return read.sections
      if (attempt >= 1) throw new SummarizerFault(use ? 'invalid_output' : 'no_tool_call', read.error)
      messages.push({ role: 'assistant', content: message.content ?? null, ...(message.tool_calls ? { tool_calls: message.tool_calls } : {}) })
      if (use) messages.push({ role: 'tool', tool_call_id: use.id, content: `${read.error}. Call ${SUMMARY_TOOL_NAME} again with valid arguments.` })
      else messages.push({ role: 'user', content: `${read.error}. Call ${SUMMARY_TOOL_NAME} with the summary.` })
    }
  }
}

/** A function call's arguments (JSON text) as sections, or what is wrong with them. */
export function readArguments(text: string): ReturnType<typeof readToolInput> {
  let input: unknown
  try {
    input = JSON.parse(text)
  } catch {
    return { error: `the ${SUMMARY_TOOL_NAME} arguments are not JSON` }
  }
  return readToolInput(input)
}
