import { type RenderedMessage, type SummarySections, at, fitSections, formatSummary, renderedSpan, textTokens } from '../compaction/index.js'
import { DOCTRINE_TEXT } from '../prompts/doctrine.js'
import { chunkParts } from './chunks.js'
import { SummarizerFault } from './faults.js'
import type { SummarizeRequest, SummarizeResult } from './summarizer.js'
import { SUMMARY_TOOL_NAME, summaryTool } from './tool.js'

/** Room for the message framing and the prompt's own sentences around the transcript. */
const PROMPT_OVERHEAD_TOKENS = 600
export const MIN_OUTPUT_TOKENS = 1_024
export const MAX_OUTPUT_TOKENS = 16_000

/** What the calls of one summary cost. */
export interface Usage {
  input: number
  output: number
  calls: number
}

/** One call of a model API: the prompt in, the summary's sections out (after its own one retry). */
export type SummaryCall = (call: {
  prompt: string
  summaryBudget: number
  model: string
  usage: Usage
  signal: AbortSignal | undefined
}) => Promise<SummarySections>

export interface FoldOptions {
  /** Most input tokens one call may take: doctrine, tool, prior summary, instructions and transcript. */
  inputBudgetTokens: number
  /** The model of the last call, which writes the summary returned. */
  model: string
  /** The model of the calls before it, which fold the earlier parts of a long span (a cheaper one); `model` when absent. */
  foldModel?: string
}

/** The tokens every call takes before the transcript: the doctrine, the tool and the prompt's framing. */
export const FIXED_TOKENS = textTokens(DOCTRINE_TEXT) + textTokens(JSON.stringify(summaryTool)) + PROMPT_OVERHEAD_TOKENS

/** The output a call may write for a summary of this budget. */
export function maxOutputTokens(summaryBudget: number): number {
  return Math.min(MAX_OUTPUT_TOKENS, Math.max(MIN_OUTPUT_TOKENS, summaryBudget * 2))
}

/**
 * A summary of the span in one call, or folded over several: the span is rendered (clipped, redacted),
 * split at message boundaries into parts that fit the input budget, and each call gets the summary so far
 * and returns it updated. The API each call reaches is the caller's.
 */
export async function foldSummary(
  request: SummarizeRequest,
  options: FoldOptions,
  call: SummaryCall
): Promise<{ sections: SummarySections | undefined; usage: Usage }> {
  const { plan, redactors, instructions, signal } = request
  const focus = instructions?.trim() ? redactors.redact(instructions.trim()) : undefined
  const summaryBudget = Math.max(200, Math.floor(plan.summaryMaxTokens / plan.scale))
  // The running summary is fitted to the summary budget, so it never takes more than that in a call.
  const chunkBudget = options.inputBudgetTokens - FIXED_TOKENS - summaryBudget - textTokens(focus ?? '')
  if (chunkBudget < 500) throw new SummarizerFault('bad_request', `the summarizer input budget (${options.inputBudgetTokens}) leaves no room for the span`)
  const chunks = chunkParts(renderedSpan(plan, redactors).parts, chunkBudget)
  const usage: Usage = { input: 0, output: 0, calls: 0 }
  let running: SummarySections | undefined = plan.prior
  for (let k = 0; k < chunks.length; k++) {
    const model = k === chunks.length - 1 ? options.model : (options.foldModel ?? options.model)
    const written = await call({ prompt: promptFor(at(chunks, k), k, chunks.length, running, focus, summaryBudget), summaryBudget, model, usage, signal })
    running = fitSections(written, summaryBudget, { id: 'running', compactedTurns: 0 })
  }
  return { sections: running, usage }
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
      index === 0
        ? 'The summary of the conversation before this span (a prior compaction); merge into it:'
        : 'The summary so far, of the earlier parts of this span; update it:',
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

/** A model's summary of the span (folded where it is long) with the report of what its calls cost. */
export async function modelSummary(
  kind: 'anthropic' | 'openai' | 'gemini',
  request: SummarizeRequest,
  options: FoldOptions,
  call: SummaryCall
): Promise<SummarizeResult> {
  const started = performance.now()
  const { sections, usage } = await foldSummary(request, options, call)
  return {
    sections,
    report: {
      kind,
      model: options.model,
      input_tokens: usage.input,
      output_tokens: usage.output,
      calls: usage.calls,
      fallback_reason: null,
      duration_ms: Math.round(performance.now() - started)
    }
  }
}
