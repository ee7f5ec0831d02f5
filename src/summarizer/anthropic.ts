import type Anthropic from '@anthropic-ai/sdk'
import {
  type RenderedMessage,
  type SummarySections,
  fitSections,
  formatSummary,
  renderedSpan,
  textTokens
} from '../compaction/index.js'
import { DOCTRINE_TEXT } from '../prompts/doctrine.js'
import { chunkParts } from './chunks.js'
import { SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'
import { SUMMARY_TOOL_NAME, readToolInput, summaryTool } from './tool.js'
import { at } from '../compaction/index.js'

export interface AnthropicSummarizerOptions {
  client: Anthropic
  model: string
  /** Most input tokens one call may take: doctrine, tool, prior summary, instructions and transcript. */
  inputBudgetTokens: number
}

/** Room for the message framing and the prompt's own sentences around the transcript. */
const PROMPT_OVERHEAD_TOKENS = 600
const MIN_OUTPUT_TOKENS = 1_024
const MAX_OUTPUT_TOKENS = 16_000

interface Usage {
  input: number
  output: number
  calls: number
}

/**
 * Summarizes with Anthropic under the server-owned doctrine. The span is rendered (clipped, redacted),
 * split at message boundaries into chunks that fit the input budget, and folded: each call gets the
 * summary so far and returns it updated, through a forced tool call whose input is the sections.
 * An invalid answer is retried once with what was wrong; the SDK alone retries 429, 5xx and 529.
 */
export class AnthropicSummarizer implements Summarizer {
  readonly kind = 'anthropic' as const
  readonly model: string
  private readonly client: Anthropic
  private readonly inputBudget: number
  private readonly fixedTokens: number

  constructor(options: AnthropicSummarizerOptions) {
    this.client = options.client
    this.model = options.model
    this.inputBudget = options.inputBudgetTokens
    this.fixedTokens = textTokens(DOCTRINE_TEXT) + textTokens(JSON.stringify(summaryTool)) + PROMPT_OVERHEAD_TOKENS
  }

  async summarize({ plan, instructions, signal }: SummarizeRequest): Promise<SummarizeResult> {
    const started = performance.now()
    const focus = instructions?.trim() ? plan.redact(instructions.trim()) : undefined
    const summaryBudget = Math.max(200, Math.floor(plan.summaryMaxTokens / plan.scale))
    // The running summary is fitted to the summary budget, so it never takes more than that in a call.
    const chunkBudget = this.inputBudget - this.fixedTokens - summaryBudget - textTokens(focus ?? '')
    if (chunkBudget < 500) throw new SummarizerFault('bad_request', `the summarizer input budget (${this.inputBudget}) leaves no room for the span`)
    const chunks = chunkParts(renderedSpan(plan).parts, chunkBudget)
    const usage: Usage = { input: 0, output: 0, calls: 0 }

    let running: SummarySections | undefined = plan.prior
    for (let k = 0; k < chunks.length; k++) {
      const prompt = promptFor(at(chunks, k), k, chunks.length, running, focus, summaryBudget)
      const written = await this.call(prompt, summaryBudget, usage, signal)
      running = fitSections(written, summaryBudget, { id: 'running', compactedTurns: 0 })
    }
    return {
      sections: running,
      report: {
        kind: 'anthropic',
        model: this.model,
        input_tokens: usage.input,
        output_tokens: usage.output,
        calls: usage.calls,
        fallback_reason: null,
        duration_ms: Math.round(performance.now() - started)
      }
    }
  }

  /** One summary call, and at most one retry when the answer is not a valid tool call. */
  private async call(prompt: string, summaryBudget: number, usage: Usage, signal: AbortSignal | undefined): Promise<SummarySections> {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: prompt }]
    for (let attempt = 0; ; attempt++) {
      let response: Anthropic.Message
      try {
        response = await this.client.messages.create(
          {
            model: this.model,
            // No temperature: the API deprecated sampling parameters, and this SDK no longer sends them.
            // The forced tool call and the doctrine are what keep the answer's form fixed.
            max_tokens: Math.min(MAX_OUTPUT_TOKENS, Math.max(MIN_OUTPUT_TOKENS, summaryBudget * 2)),
            system: DOCTRINE_TEXT,
            tools: [summaryTool as Anthropic.Tool],
            tool_choice: { type: 'tool', name: SUMMARY_TOOL_NAME },
            messages
          },
          { signal }
        )
      } catch (err) {
        throw faultOf(err)
      }
      usage.calls++
      usage.input += response.usage.input_tokens + (response.usage.cache_read_input_tokens ?? 0) + (response.usage.cache_creation_input_tokens ?? 0)
      usage.output += response.usage.output_tokens
      if (response.stop_reason === 'refusal') throw new SummarizerFault('refusal', 'the model declined to summarize')

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

function promptFor(
  chunk: readonly RenderedMessage[],
  index: number,
  total: number,
  running: SummarySections | undefined,
  focus: string | undefined,
  summaryBudget: number
): string {
  const first = at(chunk, 0).index
  const last = at(chunk, chunk.length - 1).index
  const lines = [`Summary budget: at most about ${summaryBudget} tokens for the whole summary.`]
  if (running) {
    lines.push(
      '',
      index === 0 ? 'The summary of the conversation before this span (a prior compaction); merge into it:' : 'The summary so far, of the earlier parts of this span; update it:',
      formatSummary(running, { id: 'prior', compactedTurns: 0 })
    )
  }
  if (focus) lines.push('', `The user's focus for this compaction (it adds to your instructions, it does not replace them): ${focus}`)
  lines.push(
    '',
    total > 1 ? `Part ${index + 1} of ${total} of the span: messages #${first} to #${last}.` : `The span: messages #${first} to #${last}.`,
    '<transcript>',
    chunk.map((p) => p.text).join('\n\n'),
    '</transcript>',
    '',
    `Call ${SUMMARY_TOOL_NAME} with the ${running ? 'updated ' : ''}summary.`
  )
  return lines.join('\n')
}
