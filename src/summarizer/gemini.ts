import { ApiError, type Content, FunctionCallingConfigMode, type GenerateContentResponse, type GoogleGenAI } from '@google/genai'
import type { SummarySections } from '../compaction/index.js'
import { DOCTRINE_TEXT } from '../prompts/doctrine.js'
import { type SummaryCall, maxOutputTokens, modelSummary } from './fold.js'
import { SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js'
import { SUMMARY_TOOL_NAME, readToolInput, summaryTool } from './tool.js'

export interface GeminiSummarizerOptions {
  client: GoogleGenAI
  model: string
  /** The model that folds the earlier parts of a span too long for one call; `model` when absent. */
  foldModel?: string
  /** Most input tokens one call may take: doctrine, tool, prior summary, instructions and transcript. */
  inputBudgetTokens: number
}

/** What went wrong in a call through Google's SDK, named as the other SDKs' faults are (after its own retries). */
export function geminiFault(err: unknown): SummarizerFault {
  if (err instanceof SummarizerFault) return err
  if (err instanceof ApiError) {
    const message = err.message
    if (err.status === 429) return new SummarizerFault('rate_limited', message, { cause: err })
    if (err.status === 401 || err.status === 403) return new SummarizerFault('auth_error', message, { cause: err })
    if (err.status === 503) return new SummarizerFault('overloaded', message, { cause: err })
    if (err.status === 408 || err.status === 504) return new SummarizerFault('timeout', message, { cause: err })
    if (err.status >= 500) return new SummarizerFault('server_error', message, { cause: err })
    return new SummarizerFault('bad_request', message, { cause: err })
  }
  if (err instanceof Error && err.name === 'AbortError') return new SummarizerFault('cancelled', err.message, { cause: err })
  if (err instanceof TypeError) return new SummarizerFault('connection_error', err.message, { cause: err })
  return faultOf(err)
}

/**
 * Summarizes through Gemini's API with Google's own SDK (`COMPACT_SUMMARIZER=gemini`), under the same
 * doctrine, prompt and folding as the others: the doctrine as the system instruction, a forced function call
 * (mode ANY, the summary function alone) whose arguments are the sections. An answer that is not a valid call
 * is retried once with what was wrong; the SDK retries 429 and 5xx itself.
 */
export class GeminiSummarizer implements Summarizer {
  readonly kind = 'gemini' as const
  readonly model: string

  constructor(private readonly options: GeminiSummarizerOptions) {
    this.model = options.model
  }

  summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    return modelSummary('gemini', request, this.options, this.call)
  }

  private readonly call: SummaryCall = async ({ prompt, summaryBudget, model, usage, signal }): Promise<SummarySections> => {
    const contents: Content[] = [{ role: 'user', parts: [{ text: prompt }] }]
    for (let attempt = 0; ; attempt++) {
      let response: GenerateContentResponse
      try {
        response = await this.options.client.models.generateContent({
          model,
          contents,
          config: {
            systemInstruction: DOCTRINE_TEXT,
            maxOutputTokens: maxOutputTokens(summaryBudget),
            tools: [
              { functionDeclarations: [{ name: SUMMARY_TOOL_NAME, description: summaryTool.description, parametersJsonSchema: summaryTool.input_schema }] }
            ],
            toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: [SUMMARY_TOOL_NAME] } },
            ...(signal ? { abortSignal: signal } : {})
          }
        })
      } catch (err) {
        throw geminiFault(err)
      }
      usage.calls++
      usage.input += response.usageMetadata?.promptTokenCount ?? 0
      usage.output += response.usageMetadata?.candidatesTokenCount ?? 0
      const candidate = response.candidates?.[0]
      if (!candidate)
        throw new SummarizerFault(
          response.promptFeedback?.blockReason ? 'refusal' : 'invalid_output',
          response.promptFeedback?.blockReason ? `the prompt was blocked: ${response.promptFeedback.blockReason}` : 'the answer had no candidate'
        )
      if (candidate.finishReason === 'SAFETY' || candidate.finishReason === 'RECITATION' || candidate.finishReason === 'PROHIBITED_CONTENT')
        throw new SummarizerFault('refusal', `the answer was stopped: ${candidate.finishReason}`)
      const call = response.functionCalls?.find((c) => c.name === SUMMARY_TOOL_NAME)
      const read = call ? readToolInput(call.args ?? {}) : { error: `the answer did not call ${SUMMARY_TOOL_NAME}` }
      if ('sections' in read) return read.sections
      if (attempt >= 1) throw new SummarizerFault(call ? 'invalid_output' : 'no_tool_call', read.error)
      // the model's own content goes back as it came (its thought signatures with it), then what was wrong
      if (candidate.content) contents.push(candidate.content)
      contents.push(
        call
          ? {
              role: 'user',
              parts: [
                {
                  functionResponse: {
                    name: SUMMARY_TOOL_NAME,
                    ...(call.id ? { id: call.id } : {}),
                    response: { error: `${read.error}. Call ${SUMMARY_TOOL_NAME} again with valid arguments.` }
                  }
                }
              ]
            }
          : { role: 'user', parts: [{ text: `${read.error}. Call ${SUMMARY_TOOL_NAME} with the summary.` }] }
      )
    }
  }
}
