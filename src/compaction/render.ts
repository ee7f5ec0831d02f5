import { clipHeadTail, sliceHead } from './clip.js'
import { isServiceText, isSummaryText } from './markers.js'
import { type Redact, type RedactMany, redact, redactValues } from './redact.js'
import { isSignalLine, shortLine } from './signal.js'
import { type ParsedSummary, parseSummary } from './summary-text.js'
import { type Block, type Message, blocksOf, isPromptMessage, isTextBlock, isToolResult, toolResultText } from './types.js'
import { foreignSummary, isHarnessContext } from './context.js'
import { at } from './at.js'
import { type CommonText, usersWords, withoutAnsi } from './harness.js'

export interface RenderOptions {
  /** Characters kept from the head and the tail of a tool output. */
  toolOutputHead: number
  toolOutputTail: number
  /** Signal lines kept from the clipped middle of a tool output. */
  signalLines: number
  /** Longest assistant text, tool input or user text rendered whole. */
  assistantText: number
  toolInput: number
  userText: number
  /** `plain` cuts each tool output at `toolOutputHead` characters and keeps nothing else (the baseline). */
  clip: 'signal' | 'plain'
  /** Applied to every text before it is clipped, so that no clip can cut a secret's marker off its body. */
  redactBeforeClip: Redact
  /** Applied to the rendered messages, clipped, all at once: the full ruleset runs over what actually leaves. */
  redactParts: RedactMany
  /**
   * `users-words`: a prompt's harness text (markup, repeats, text other conversations sent) is named in a
   * line where it first came, not copied; `as-sent` renders prompts whole (the baseline).
   */
  prompts?: 'users-words' | 'as-sent'
  /** Text the same key's other conversations sent, by line fingerprint. */
  commonText?: CommonText
}

export const DEFAULT_RENDER: RenderOptions = {
  toolOutputHead: 1_200,
  toolOutputTail: 600,
  signalLines: 30,
  assistantText: 4_000,
  toolInput: 1_500,
  userText: 12_000,
  clip: 'signal',
  redactBeforeClip: redact,
  redactParts: (texts) => texts.map(redact)
}

export interface RenderedMessage {
  /** Index in the client's history. */
  index: number
  text: string
}

export interface RenderedSpan {
  /** One part per message that says something; a prior summary is not among them (findPriorSummaries). */
  parts: RenderedMessage[]
}

/** Summaries of earlier compactions in a span, oldest first, without rendering the span. */
export function findPriorSummaries(messages: readonly Message[]): ParsedSummary[] {
  const out: ParsedSummary[] = []
  for (const m of messages) {
    if (m.role !== 'user' || typeof m.content === 'string') continue
    for (const b of m.content) {
      if (isTextBlock(b) && isSummaryText(b.text)) {
        const parsed = parseSummary(b.text)
        if (parsed) out.push(parsed)
      }
    }
  }
  return out
}

export function spanText(span: RenderedSpan): string {
  return span.parts.map((p) => p.text).join('\n\n')
}

/** Head and tail of a tool output, with the signal lines of the middle kept between them. */
export function clipToolOutput(text: string, o: RenderOptions): string {
  if (o.clip === 'plain') return text.length <= o.toolOutputHead ? text : `${sliceHead(text, o.toolOutputHead)}…`
  if (text.length <= o.toolOutputHead + o.toolOutputTail) return text
  const lines = text.split('\n')
  let headEnd = 0
  for (let n = 0; headEnd < lines.length && n + at(lines, headEnd).length <= o.toolOutputHead; headEnd++) n += at(lines, headEnd).length + 1
  let tailStart = lines.length
  for (let n = 0; tailStart > headEnd && n + at(lines, tailStart - 1).length <= o.toolOutputTail; tailStart--) n += at(lines, tailStart - 1).length + 1
  if (headEnd === 0 && tailStart === lines.length) return clipHeadTail(text, o.toolOutputHead + o.toolOutputTail)

  const middle = lines.slice(headEnd, tailStart)
  const signal = middle.filter(isSignalLine)
  const kept = signal.slice(Math.max(0, signal.length - o.signalLines)).map(shortLine)
  const note = `[… ${middle.length} lines clipped${kept.length ? `; ${kept.length} signal lines kept:` : ''} …]`
  return [...lines.slice(0, headEnd), note, ...kept, ...(kept.length ? ['[…]'] : []), ...lines.slice(tailStart)].join('\n')
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : clipHeadTail(text, max)
}

/** A tool input as JSON, each string redacted where it stands first (redactValues), then the whole. */
function inputJson(input: unknown, o: RenderOptions): string {
  return o.redactBeforeClip(JSON.stringify(redactValues(input ?? {}, o.redactBeforeClip)))
}

function renderInput(input: unknown, o: RenderOptions): string {
  if (typeof input === 'object' && input !== null) {
    const fields = input as Record<string, unknown>
    for (const key of ['command', 'cmd']) {
      if (typeof fields[key] === 'string') {
        const rest = Object.fromEntries(Object.entries(fields).filter(([k]) => k !== key))
        const extra = Object.keys(rest).length > 0 ? ` ${shorten(inputJson(rest, o), o.toolInput)}` : ''
        return `${shorten(o.redactBeforeClip(fields[key] as string), o.toolInput)}${extra}`
      }
    }
  }
  return shorten(inputJson(input, o), o.toolInput)
}

function renderBlock(block: Block, role: Message['role'], names: Map<string, string>, o: RenderOptions): string | undefined {
  switch (block.type) {
    case 'text':
      if (!isTextBlock(block) || block.text.trim() === '') return undefined
      return shorten(o.redactBeforeClip(withoutAnsi(block.text)), role === 'user' ? o.userText : o.assistantText)
    case 'thinking':
    case 'redacted_thinking':
      return undefined
    case 'tool_use':
      return `→ ${String(block.name)}: ${renderInput(block.input, o)}`
    case 'tool_result': {
      if (!isToolResult(block)) return undefined
      const name = names.get(block.tool_use_id) ?? 'tool'
      const status = block.is_error === true ? 'error' : 'ok'
      return `← ${name} (${status}):\n${clipToolOutput(o.redactBeforeClip(withoutAnsi(toolResultText(block))), o)}`
    }
    case 'image':
      return '[image]'
    case 'document': {
      const title = typeof block.title === 'string' ? `: ${o.redactBeforeClip(block.title)}` : ''
      return `[document${title}]`
    }
    default:
      return `[${block.type} block]`
  }
}

/** Each prompt's text in the user's words (harness text named once), by its index in `messages`. */
function promptWords(messages: readonly Message[], skip: number | undefined, o: RenderOptions): Map<number, string> {
  const places: number[] = []
  const texts: string[] = []
  messages.forEach((m, k) => {
    if (k === skip || !isPromptMessage(m)) return
    places.push(k)
    texts.push(
      blocksOf(m)
        .filter(isTextBlock)
        .map((b) => b.text)
        .filter((t) => t.trim() !== '' && !isServiceText(t) && !isHarnessContext(t))
        .join('\n')
    )
  })
  const words = usersWords(texts, o.commonText)
  return new Map(places.map((k, i) => [k, words[i] ?? '']))
}

/**
 * The span as a compact transcript for the summarizer: one part per message, the service's own summary
 * and note blocks left out, and so are system messages and harness context (carried over verbatim) (a prior summary is merged, never re-summarized as if the user said it), tool
 * outputs clipped, thinking dropped, media as placeholders, every secret redacted before any clip.
 * `offset` is the index of messages[0] in the client's history.
 */
export function renderSpan(messages: readonly Message[], offset = 0, options: RenderOptions = DEFAULT_RENDER): RenderedSpan {
  const parts: RenderedMessage[] = []
  const names = new Map<string, string>()
  const prior = offset === 0 ? foreignSummary(messages) : undefined
  const words = options.prompts === 'as-sent' ? undefined : promptWords(messages, prior?.question, options)
  messages.forEach((m, k) => {
    // System messages, the harness context of prompts and another agent's summary at the start are
    // carried over verbatim, not summarized.
    if (m.role === 'system' || k === prior?.question || k === prior?.summary) return
    const prompt = isPromptMessage(m)
    const lines: string[] = []
    const said = prompt ? words?.get(k) : undefined
    if (said) lines.push(shorten(options.redactBeforeClip(said), options.userText))
    for (const block of blocksOf(m)) {
      if (block.type === 'tool_use') names.set(String(block.id), String(block.name))
      if (isTextBlock(block) && (isServiceText(block.text) || (prompt && isHarnessContext(block.text)))) continue
      if (isTextBlock(block) && words !== undefined && prompt) continue // its words are rendered above
      const rendered = renderBlock(block, m.role, names, options)
      if (rendered !== undefined) lines.push(rendered)
    }
    if (lines.length > 0) parts.push({ index: offset + k, text: `[#${offset + k} ${m.role}]\n${lines.join('\n')}` })
  })
  const redacted = options.redactParts(parts.map((p) => p.text))
  return { parts: parts.map((p, k) => ({ ...p, text: at(redacted, k) })) }
}
