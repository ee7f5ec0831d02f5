import type Anthropic from '@anthropic-ai/sdk'
import { LIST_SECTIONS, type Message, SECTION_PURPOSE, type SummarySections, at, textTokens } from '../compaction/index.js'
import { DOCTRINE_TEXT } from '../prompts/doctrine.js'
import { type Usage, maxOutputTokens } from './fold.js'
import { countAnswer } from './anthropic.js'
import { SummarizerFault, faultOf } from './faults.js'
import type { SummarizeRequest, SummarizeResult, Summarizer, SummarizerKind } from './summarizer.js'
import { readToolInput } from './tool.js'

/** The conversation a summary is written in: the client's own request, as its upstream last received it. */
export interface ClientConversation {
  /** The client's request body but for its messages (model, system, tools, tool_choice, thinking…), as sent. */
  request: Record<string, unknown>
  /** The messages as the upstream last received them (the history behind the current summary turn, if any). */
  messages: Message[]
  /** The Messages API client with the client's own credentials and the proxy's upstream. */
  client: Anthropic
  /** Settles when the client's own request has been answered (its prefix is then in the upstream's cache). */
  after?: Promise<unknown>
}

/** The section names and what each holds, for the instruction (the tool's schema, as prose the model answers in JSON). */
const SECTIONS_TEXT = [
  `- "objective" (a string): ${SECTION_PURPOSE.objective}`,
  ...LIST_SECTIONS.map((k) => `- "${k}" (an array of strings): ${SECTION_PURPOSE[k]}`)
].join('\n')

/** The instruction appended after the conversation: the doctrine, what the summary replaces, and the answer's form. */
export function summaryInstruction(keptMessages: number, keptOpening: string, summaryBudget: number, focus?: string): string {
  const kept =
    keptMessages > 0
      ? `everything before its last ${keptMessages} message${keptMessages === 1 ? '' : 's'} is replaced by your summary; those stay verbatim after it (the first of them begins: ${JSON.stringify(keptOpening)}), so summarize what comes before them.`
      : 'all of it is replaced by your summary.'
  return [
    '<compaction-request>',
    DOCTRINE_TEXT,
    '',
    `Do not continue the work and call no tool. The conversation above is being compacted: ${kept} If it opens with a summary of earlier turns, merge that summary into yours.`,
    ...(focus ? [`The user's instructions for this compaction (follow them within the sections below): ${focus}`] : []),
    `Summary budget: at most about ${summaryBudget} tokens for the whole summary.`,
    'Answer with one JSON object and nothing else (no prose around it), with these fields, every one you can fill:',
    SECTIONS_TEXT,
    '</compaction-request>'
  ].join('\n')
}

/** The JSON object of an answer's text (alone, or in a code fence, or with words around it), or why there is none. */
export function readAnswer(text: string): { sections: SummarySections } | { error: string } {
  const start = text.indexOf('{')
  const end = text.lastIndexOf('}')
  if (start < 0 || end <= start) return { error: 'the answer held no JSON object' }
  let value: unknown
  try {
    value = JSON.parse(text.slice(start, end + 1))
  } catch (err) {
    return { error: `the answer's JSON object does not parse (${(err as Error).message})` }
  }
  const read = readToolInput(value)
  return 'sections' in read ? read : { error: read.error.replace(/the \w+ input/, 'the JSON object') }
}

/** The messages of the conversation with the instruction after them: in the last user message, or in a user message of its own. */
function withInstruction(messages: readonly Message[], instruction: string): Message[] {
  const last = messages[messages.length - 1]
  const block = { type: 'text', text: instruction }
  if (last?.role === 'user') {
    const content = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content
    return [...messages.slice(0, -1), { ...last, content: [...content, block] }]
  }
  return [...messages, { role: 'user', content: [block] }]
}

/**
 * A summary written by the client's own model in the client's own conversation: the request the client sent
 * last (its system prompt, tools, settings and messages, as its upstream received them) with the doctrine
 * appended as a final instruction. The upstream has that prefix in its cache from the client's own request,
 * so the call pays cache reads for the conversation and full price only for the instruction and the answer;
 * nothing in the prefix is changed (no tool added, no tool_choice or thinking setting changed: each would
 * miss the cache). The answer is the sections as JSON, read and checked as the tool's input is; one retry
 * with what was wrong, then the fault, which the fallback turns into the extractive summary.
 */
export class ConversationSummarizer implements Summarizer {
  readonly kind = 'anthropic' as const
  readonly model: string

  constructor(private readonly conversation: ClientConversation) {
    this.model = typeof conversation.request.model === 'string' ? conversation.request.model : 'unknown'
  }

  async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const started = performance.now()
    const { plan, signal } = request
    const summaryBudget = Math.max(200, Math.floor(plan.summaryMaxTokens / plan.scale))
    const kept = plan.cut.tail
    const opening = kept.length > 0 ? openingOf(at(kept, 0)) : ''
    const { request: sent, client } = this.conversation
    const focus = request.instructions?.trim() ? request.redactors.redact(request.instructions.trim()) : undefined
    let messages = withInstruction(this.conversation.messages, summaryInstruction(kept.length, opening, summaryBudget, focus))
    const thinking = sent.thinking as { type?: string; budget_tokens?: number } | undefined
    const thinkingTokens = thinking?.type === 'enabled' && typeof thinking.budget_tokens === 'number' ? thinking.budget_tokens : 0
    const usage: Usage = { input: 0, output: 0, calls: 0 }
    await this.conversation.after
    for (let attempt = 0; ; attempt++) {
      let response: Anthropic.Message
      try {
        const body = { ...sent, messages, max_tokens: thinkingTokens + maxOutputTokens(summaryBudget), stream: false }
        response = (await client.messages.create(body as unknown as Anthropic.MessageCreateParamsNonStreaming, { signal })) as Anthropic.Message
      } catch (err) {
        throw faultOf(err)
      }
      countAnswer(usage, response)
      const text = response.content
        .filter((b): b is Anthropic.TextBlock => b.type === 'text')
        .map((b) => b.text)
        .join('\n')
      const judged = judgeAnswer(
        text,
        attempt,
        response.content.some((b) => b.type === 'tool_use'),
        {
          kind: 'anthropic',
          model: this.model,
          usage,
          started
        }
      )
      if ('result' in judged) return judged.result
      // The retry goes on in the same conversation: its prefix, the first attempt included, is read from cache.
      messages = [...messages, { role: 'assistant', content: [{ type: 'text', text }] }, { role: 'user', content: judged.retry }]
    }
  }
}

/** What one attempt of a summary asked in a conversation came to: the summary, or the error to ask again with. */
export type Judged = { result: SummarizeResult } | { retry: string }

/**
 * An answer of a summary asked in a conversation, judged: its sections and the report where its text holds the
 * JSON object; else a fault where no retry is worth its price (the second attempt, a tool called — its pairing
 * rules leave nothing to retry in —, or no text), or the error to ask again with in the same conversation.
 */
export function judgeAnswer(
  text: string,
  attempt: number,
  calledTool: boolean,
  made: { kind: SummarizerKind; model: string; usage: { input: number; output: number; calls: number }; started: number }
): Judged {
  const read = readAnswer(text)
  if ('sections' in read) {
    const { kind, model, usage, started } = made
    const report = { kind, model, input_tokens: usage.input, output_tokens: usage.output, calls: usage.calls, fallback_reason: null }
    return { result: { sections: read.sections, report: { ...report, duration_ms: Math.round(performance.now() - started) } } }
  }
  if (attempt >= 1 || calledTool || !text.trim())
    throw new SummarizerFault('invalid_output', calledTool ? 'the model called a tool instead of answering with the summary' : read.error)
  return { retry: `${read.error}. Answer with the JSON object only.` }
}

/** A conversation forwarded upstream as its client's items: its body, and where each of the core's messages begins among them. */
export interface ForwardedItems {
  body: Record<string, unknown>
  starts: readonly number[]
}

/**
 * What a summary asked after a forwarded conversation says: the instruction (the kept part counted in the
 * client's own items, where a tool's result may be an item of its own) and the summary's budget. `field`
 * names the items (`messages`, `input`, `contents`); the request must have been forwarded, with them.
 */
export function askAfter(
  request: SummarizeRequest,
  forwarded: ForwardedItems | undefined,
  field: string
): { body: Record<string, unknown>; items: unknown[]; instruction: string; summaryBudget: number } {
  if (!forwarded) throw new SummarizerFault('bad_request', 'the request this summary continues was never forwarded')
  const items = forwarded.body[field]
  if (!Array.isArray(items)) throw new SummarizerFault('bad_request', `the forwarded request has no ${field}`)
  const { plan } = request
  const summaryBudget = Math.max(200, Math.floor(plan.summaryMaxTokens / plan.scale))
  const tail = plan.cut.tail
  const firstKept = tail.length > 0 ? (forwarded.starts[plan.cut.cut] ?? items.length) : items.length
  const focus = request.instructions?.trim() ? request.redactors.redact(request.instructions.trim()) : undefined
  const instruction = summaryInstruction(items.length - firstKept, tail.length > 0 ? openingOf(at(tail, 0)) : '', summaryBudget, focus)
  return { body: forwarded.body, items, instruction, summaryBudget }
}

/** The first words of a message, to point the model at where the kept turns begin. */
export function openingOf(message: Message): string {
  const blocks = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content
  for (const b of blocks) {
    if (b.type === 'text' && typeof b.text === 'string' && b.text.trim()) return clipWords(b.text.trim())
    if (b.type === 'tool_use' && typeof b.name === 'string') return `a ${b.name} tool call`
    if (b.type === 'tool_result') return 'a tool result'
  }
  return `a ${message.role} message`
}

function clipWords(text: string): string {
  const line = text.split('\n')[0] ?? ''
  return textTokens(line) <= 30 ? line : `${line.slice(0, 100)}…`
}
