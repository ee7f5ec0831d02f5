import { isServiceText } from './markers.js'
import { MESSAGE_OVERHEAD_TOKENS, rawMessageTokens, scaled } from './tokens.js'
import { type Block, type Message, type TextBlock, blocksOf, isPromptMessage, isTextBlock } from './types.js'

/**
 * The client's context that a compaction carries over verbatim instead of summarizing: the span's
 * mid-conversation system messages, and the harness context its prompts hold (a text block wholly
 * wrapped in one tag that names context: `<system-reminder>`, `<environment_details>`, `<user-instructions>`…).
 * They are instructions the client gave, not the user's words; summarized, they would no longer hold.
 */
export interface CarriedContext {
  /** Harness-context blocks of the span's prompts, put in the summary turn after the summary. */
  user: TextBlock[]
  /** The span's system messages' blocks, sent as one system message after the summary turn. */
  system: Block[]
  /** Kinds left out because the carried context would pass its bound (the oldest first). */
  dropped: number
}

export const NO_CONTEXT: CarriedContext = { user: [], system: [], dropped: 0 }

/** A tag of a harness's context: lower-case words joined by `-` or `_`, one of them about context or rules. */
const CONTEXT_TAG = /^<([a-z][a-z0-9]*(?:[-_][a-z0-9]+)*)(?:\s[^<>]*)?>([\s\S]*)<\/\1>$/
const CONTEXT_WORD = /(?:^|[-_])(?:system|reminder|context|environment|instructions?|rules|memory|guidelines?|policy|policies)(?:$|[-_])/

/** Whether a text is harness context: one element, wholly wrapping the text, whose tag names context. */
export function isHarnessContext(text: string): boolean {
  const t = text.trim()
  return !isServiceText(t) && contextTag(t) !== undefined
}

function contextTag(text: string): { tag: string; inner: string } | undefined {
  if (!text.startsWith('<') || !text.endsWith('>')) return undefined
  const m = CONTEXT_TAG.exec(text)
  if (!m || !CONTEXT_WORD.test(m[1] ?? '')) return undefined
  const inner = m[2] ?? ''
  // `<a>x</a> y <a>z</a>` is two elements, not one: the first closing tag must be the last.
  if (inner.includes(`</${m[1] ?? ''}>`)) return undefined
  return { tag: m[1] ?? '', inner }
}

/** What makes two pieces of context the same kind: the tag and the first line of what it says. */
function kindOf(text: string, tag: string): string {
  const first = text.split('\n').find((line) => line.trim() !== '') ?? ''
  return `${tag}\u0000${first.trim().slice(0, 120)}`
}

interface Piece {
  kind: string
  block: Block
  /** 'system' pieces go in the system message, 'user' ones in the summary turn. */
  role: 'system' | 'user'
  /** Its place among the span's pieces. */
  order: number
}

/** A line that opens a section: a markdown heading, or a line that is all bold (`**Files changed:**`). */
const SECTION_LINE = /^\s{0,3}(?:#{1,6}\s+\S|\*\*[^*\n]{2,80}\*\*:?\s*$)/

/**
 * Where a history opens with a summary another agent wrote of its own earlier turns (its compaction):
 * a short prompt answered, before any tool call, by a long text in sections. The prompt is no request of
 * the user's and the text is no turn to summarize again: it is carried over verbatim, as context.
 */
export function foreignSummary(messages: readonly Message[]): { question: number; summary: number } | undefined {
  const q = messages[0]
  const a = messages[1]
  if (!q || !a || !isPromptMessage(q) || a.role !== 'assistant') return undefined
  const blocks = blocksOf(a)
  if (blocks.some((b) => b.type !== 'text' && b.type !== 'thinking' && b.type !== 'redacted_thinking')) return undefined
  const text = blocks
    .filter(isTextBlock)
    .map((b) => b.text)
    .join('\n')
  const question = blocksOf(q)
    .filter(isTextBlock)
    .map((b) => b.text)
    .join('\n')
    .trim()
  if (question.length > FOREIGN_QUESTION_CHARS || text.length < FOREIGN_SUMMARY_CHARS) return undefined
  let sections = 0
  for (const line of text.split('\n')) if (SECTION_LINE.test(line) && ++sections >= 2) return { question: 0, summary: 1 }
  return undefined
}

/** The tag a summary another agent wrote is carried in (a tag of context: later compactions carry it on). */
export const PRIOR_SUMMARY_TAG = 'prior-summary-context'

/** The longest prompt that asks for a summary of the turns before, and the shortest summary that answers it. */
const FOREIGN_QUESTION_CHARS = 400
const FOREIGN_SUMMARY_CHARS = 800

/** The pieces of context in the span, oldest first. */
function pieces(span: readonly Message[]): Piece[] {
  const out: Piece[] = []
  const prior = foreignSummary(span)
  if (prior) {
    // In a tag of context, so that the next compaction carries it on as it carries any harness context.
    const text = blocksOf(span[prior.summary] as Message)
      .filter(isTextBlock)
      .map((b) => b.text)
      .join('\n')
    out.push({
      kind: kindOf(text, PRIOR_SUMMARY_TAG),
      block: { type: 'text', text: `<${PRIOR_SUMMARY_TAG}>\n${text}\n</${PRIOR_SUMMARY_TAG}>` },
      role: 'user',
      order: out.length
    })
  }
  for (const m of span) {
    if (m.role === 'system') {
      for (const b of blocksOf(m))
        if (isTextBlock(b) && b.text.trim() !== '') out.push({ kind: kindOf(b.text, 'system'), block: b, role: 'system', order: out.length })
    } else if (isPromptMessage(m)) {
      for (const b of blocksOf(m)) {
        if (!isTextBlock(b) || isServiceText(b.text)) continue
        const tagged = contextTag(b.text.trim())
        if (tagged) out.push({ kind: kindOf(tagged.inner, tagged.tag), block: b, role: 'user', order: out.length })
      }
    }
  }
  return out
}

/**
 * The newest of each kind of context in the span, in the order the span had them, within `maxTokens`
 * (estimated, calibrated by `scale`): when all of it would not fit, the newest kinds are kept whole and
 * the older ones left out, counted. A piece is never cut: it is carried verbatim or not at all.
 */
export function carriedContext(span: readonly Message[], maxTokens: number, scale: number): CarriedContext {
  const all = pieces(span)
  if (all.length === 0) return NO_CONTEXT
  const newest = new Map<string, Piece>()
  for (const p of all) {
    newest.delete(p.kind)
    newest.set(p.kind, p) // newest last
  }
  const kept: Piece[] = []
  let tokens = 0
  let dropped = 0
  const byAge = [...newest.values()].reverse()
  for (const p of byAge) {
    const cost = scaled(rawMessageTokens({ role: p.role, content: [p.block] }), scale)
    if (tokens + cost > maxTokens) {
      dropped++
      continue
    }
    tokens += cost
    kept.push(p)
  }
  kept.sort((a, b) => a.order - b.order)
  return {
    user: kept.filter((p) => p.role === 'user').map((p) => p.block as TextBlock),
    system: kept.filter((p) => p.role === 'system').map((p) => p.block),
    dropped
  }
}

/** The estimate of the context carried over, as it is assembled (its blocks, one system message). */
export function carriedTokens(context: CarriedContext, scale: number): number {
  const user = context.user.length > 0 ? scaled(rawMessageTokens({ role: 'user', content: [...context.user] }) - MESSAGE_OVERHEAD_TOKENS, scale) : 0
  const system = context.system.length > 0 ? scaled(rawMessageTokens({ role: 'system', content: [...context.system] }), scale) : 0
  return user + system
}
