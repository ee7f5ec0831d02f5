import type Anthropic from '@anthropic-ai/sdk'
import type { SummarySections } from '../compaction/index.js'
import { DOCTRINE_TEXT } from '../prompts/doctrine.js'
import { type SummaryCall, type Usage, maxOutputTokens, modelSummary } from './fold.js'
import { SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'
import { SUMMARY_TOOL_NAME, readToolInput, summaryTool } from './tool.js'

export interface AnthropicSummarizerOptions {
  client: Anthropic
  model: string
  /** The model that folds the earlier parts of a span too long for one call; `model` when absent. */
  foldModel?: string
  /** Most input tokens one call may take: doctrine, tool, prior summary, instructions and transcript. */
  inputBudgetTokens: number
}

/**
 * Summarizes with Anthropic's Messages API under the server-owned doctrine, through a forced tool call
 * whose input is the sections (folded over several calls for a long span: fold.ts). An invalid answer
 * is retried once with what was wrong; the SDK alone retries 429, 5xx and 529.
 */
export class AnthropicSummarizer implements Summarizer {
  readonly kind = 'anthropic' as const
  readonly model: string

  constructor(private readonly options: AnthropicSummarizerOptions) {
    this.model = options.model
  }

  summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    return modelSummary('anthropic', request, this.options, this.call)
  }

  /** One summary call, and at most one retry when the answer is not a valid tool call. */
  private readonly call: SummaryCall = async ({ prompt, summaryBudget, model, usage, signal }): Promise<SummarySections> => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: prompt }]
    for (let attempt = 0; ; attempt++) {
      let response: Anthropic.Message
      try {
        response = await this.options.client.messages.create(
          {
            model,
            // No temperature: the API deprecated sampling parameters, and this SDK no longer sends them.
            // The forced tool call and the doctrine are what keep the answer's form fixed.
            max_tokens: maxOutputTokens(summaryBudget),
            // The doctrine (after the summary tool, which comes first in a prompt) is the prefix every summary
            // call shares: marked for the cache, each call after the first reads it at a tenth of the price.
            system: [{ type: 'text', text: DOCTRINE_TEXT, cache_control: { type: 'ephemeral' } }],
            tools: [summaryTool as Anthropic.Tool],
            tool_choice: { type: 'tool', name: SUMMARY_TOOL_NAME },
            messages
          },
          { signal }
        )
      } catch (err) {
        throw faultOf(err)
      }
      countAnswer(usage, response)

      const use = response.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use' && b.name === SUMMARY_TOOL_NAME)
      const read = use ? readToolInput(use.input) : { error: `the answer did not call ${SUMMARY_TOOL_NAME}` }
      if ('sections' in read) return read.sections
      if (attempt >= 1) throw new SummarizerFault(use ? 'invalid_output' : 'no_tool_call', read.error)
      messages.push({ role: 'assistant', content: response.content as Anthropic.ContentBlockParam[] })
      messages.push({
        role: 'user',
        content: use
          ? [{ type: 'tool_result', tool_use_id: use.id, is_error: true, content: `${read.error}. Call ${SUMMARY_TOOL_NAME} again with valid input.` }]
          : `${read.error}. Call ${SUMMARY_TOOL_NAME} with the summary.`
      })
    }
  }
}

/** A Messages API answer counted (its input whether read from the cache, written to it or not), and refused where the model declined. */
export function countAnswer(usage: Usage, response: Anthropic.Message): void {
  usage.calls++
  usage.input += response.usage.input_tokens + (response.usage.cache_read_input_tokens ?? 0) + (response.usage.cache_creation_input_tokens ?? 0)
  usage.output += response.usage.output_tokens
  if (response.stop_reason === 'refusal') throw new SummarizerFault('refusal', 'the model declined to summarize')
}
