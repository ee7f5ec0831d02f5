/**
 * Clearing: old tool results (and, where asked, their calls' inputs and old thinking) replaced by short
 * placeholders, everything else of the history as the client sent it. The call stays with its result (a
 * pair is never split), the placeholder keeps what the agent needs to go on (the call, its outcome, the
 * lines that say why it failed) and names the cold-layer passage that holds the whole output. Pure: the
 * caller keeps the evidence and sends the history on.
 */
import { commandLine } from './ledger.js'
import { exitCodeOf, shortLine, signalLines } from './signal.js'
import { sliceHead } from './clip.js'
import { CHARS_PER_TOKEN, jsonChars, rawMessageTokens } from './tokens.js'
import {
  type Block,
  type Message,
  type ToolResultBlock,
  type ToolUseBlock,
  blocksOf,
  isPromptMessage,
  isToolResult,
  isToolUse,
  toolResultText
} from './types.js'

/** How a cleared result's placeholder begins: a result that already reads so is not cleared again. */
export const CLEARED_MARK = '[tool result cleared'
/** How a cleared call's input reads. */
export const CLEARED_INPUT = { cleared: 'the input of this call was cleared' } as const
/** Signal lines a placeholder keeps. */
const PLACEHOLDER_SIGNAL_LINES = 3

export interface ClearToolUsesOptions {
  /** The most recent tool uses kept whole (every tool's, excluded ones counted). */
  keep: number
  /** Tools whose uses are never cleared. */
  excludeTools: readonly string[]
  /** The calls' inputs cleared too: every cleared call's (true), none (false), or those of these tools. */
  clearInputs: boolean | readonly string[]
  /** Nothing is cleared unless at least this many tokens would go. */
  clearAtLeast: number
  /** Clearing stops, oldest first, once this many tokens have gone (undefined: every use past `keep`). */
  enough?: number
  /** Only these uses are cleared, whatever `keep` says (a conversation's earlier clearing, applied again). */
  only?: ReadonlySet<string>
  /** Results that cannot be cleared where they are (their message and block): a client format that cannot take a placeholder there. */
  fixed?: (message: number, block: number) => boolean
}

/** One tool use cleared: where, what, how much went, and the output's whole text for the cold layer. */
export interface ClearedUse {
  /** The result's message and block in the history as sent. */
  message: number
  block: number
  /** The call's message. */
  callMessage: number
  tool_use_id: string
  name: string
  /** Tokens that went (the result's less its placeholder's, and the input's where it was cleared). */
  tokens: number
  inputCleared: boolean
  /** The call and its output as the cold layer keeps them. */
  evidence: string
}

export interface Clearing {
  messages: Message[]
  cleared: ClearedUse[]
  tokens: number
}

/** The call in a line: its command where it ran one, else its input as JSON, short. */
function callLine(use: ToolUseBlock): string {
  const input = use.input as Record<string, unknown> | undefined
  const argv = input && typeof input === 'object' ? (input.command ?? input.cmd ?? input.argv) : undefined
  const command = typeof argv === 'string' ? argv : Array.isArray(argv) ? commandLine(argv) : undefined
  const text = command ?? JSON.stringify(use.input ?? {})
  return `${use.name}(${text.length > 160 ? `${sliceHead(text, 160)}…` : text})`
}

/** What a placeholder says of the output: its outcome and the lines that say why it failed. */
function outcomeOf(result: ToolResultBlock, text: string): string {
  const code = exitCodeOf(text)
  const outcome = result.is_error === true ? 'it failed' : code !== undefined ? `exit status ${code}` : 'no error reported'
  const lines = signalLines(text, PLACEHOLDER_SIGNAL_LINES).map(shortLine)
  return lines.length > 0 ? `${outcome}; ${lines.join(' | ')}` : outcome
}

/** The placeholder of a cleared result: the call, its outcome, its size, and where its whole text is. */
export function placeholder(use: ToolUseBlock, result: ToolResultBlock, text: string, recallNote: string): string {
  return `${CLEARED_MARK} to save context: ${callLine(use)} → ${outcomeOf(result, text)} (${text.length.toLocaleString('en-US')} characters). ${recallNote}]`
}

function blockTokens(block: Block): number {
  return rawMessageTokens({ role: 'user', content: [block] })
}

/** Whether a tool's input is cleared with its result. */
function clearsInput(options: ClearToolUsesOptions, name: string): boolean {
  return options.clearInputs === true || (Array.isArray(options.clearInputs) && options.clearInputs.includes(name))
}

/**
 * Clears tool results oldest first, past the `keep` most recent tool uses, never of `excludeTools`, until
 * `enough` tokens have gone (or all such), and only if at least `clearAtLeast` would. `recallNote` says, for
 * a use, how its whole output can be found again. The history is copied where it changes, never mutated.
 */
export function clearToolUses(messages: readonly Message[], options: ClearToolUsesOptions, recallNote: (toolUseId: string) => string): Clearing {
  const calls = new Map<string, { message: number; block: number; use: ToolUseBlock }>()
  const order: string[] = []
  messages.forEach((m, i) => {
    if (m.role !== 'assistant' || typeof m.content === 'string') return
    m.content.forEach((b, j) => {
      if (isToolUse(b) && typeof b.id === 'string') {
        calls.set(b.id, { message: i, block: j, use: b })
        order.push(b.id)
      }
    })
  })
  const results = new Map<string, { message: number; block: number; result: ToolResultBlock }>()
  messages.forEach((m, i) => {
    if (m.role !== 'user' || typeof m.content === 'string') return
    m.content.forEach((b, j) => {
      if (isToolResult(b) && typeof b.tool_use_id === 'string' && !results.has(b.tool_use_id)) results.set(b.tool_use_id, { message: i, block: j, result: b })
    })
  })
  const candidates = options.only ? order.filter((id) => options.only?.has(id)) : order.slice(0, Math.max(0, order.length - Math.max(0, options.keep)))
  const planned: (ClearedUse & { placeholder: string })[] = []
  let total = 0
  for (const id of candidates) {
    if (options.enough !== undefined && total >= options.enough) break
    const call = calls.get(id)
    const found = results.get(id)
    if (!call || !found || options.excludeTools.includes(call.use.name) || options.fixed?.(found.message, found.block)) continue
    const text = toolResultText(found.result)
    if (text.startsWith(CLEARED_MARK)) continue
    const note = placeholder(call.use, found.result, text, recallNote(id))
    const inputCleared = clearsInput(options, call.use.name)
    const before = blockTokens(found.result) + (inputCleared ? jsonChars(call.use.input ?? {}) / CHARS_PER_TOKEN : 0)
    const after = blockTokens({ ...found.result, content: note }) + (inputCleared ? jsonChars(CLEARED_INPUT) / CHARS_PER_TOKEN : 0)
    const tokens = Math.max(0, Math.round(before - after))
    if (tokens <= 0) continue
    total += tokens
    planned.push({
      message: found.message,
      block: found.block,
      callMessage: call.message,
      tool_use_id: id,
      name: call.use.name,
      tokens,
      inputCleared,
      evidence: `${callLine(call.use)} [${id}]\n${text}`,
      placeholder: note
    })
  }
  if (planned.length === 0 || total < options.clearAtLeast) return { messages: [...messages], cleared: [], tokens: 0 }

  const out = [...messages]
  const copy = (i: number): Block[] => {
    const m = out[i] as Message
    const blocks = [...blocksOf(m)]
    out[i] = { ...m, content: blocks }
    return blocks
  }
  const copied = new Set<number>()
  const blocksAt = (i: number): Block[] => {
    if (!copied.has(i)) {
      copied.add(i)
      return copy(i)
    }
    return (out[i] as Message).content as Block[]
  }
  for (const p of planned) {
    const blocks = blocksAt(p.message)
    blocks[p.block] = { ...(blocks[p.block] as ToolResultBlock), content: p.placeholder }
    if (p.inputCleared) {
      const call = calls.get(p.tool_use_id) as { block: number }
      const callBlocks = blocksAt(p.callMessage)
      callBlocks[call.block] = { ...(callBlocks[call.block] as ToolUseBlock), input: { ...CLEARED_INPUT } }
    }
  }
  return { messages: out, cleared: planned.map(({ placeholder: _p, ...use }) => use), tokens: total }
}

/** Thinking cleared: the assistant turns whose thinking went, and the tokens that went with it. */
export interface ThinkingClearing {
  messages: Message[]
  turns: number
  tokens: number
}

const THINKING = new Set(['thinking', 'redacted_thinking'])

/**
 * Clears the thinking (and redacted thinking) of every assistant turn but the `keep` most recent (a turn:
 * the assistant's messages from one prompt of the user to the next, its tool loop included). An assistant
 * message left with nothing is given a short text, as the API refuses an empty one.
 */
export function clearThinking(messages: readonly Message[], keep: number | 'all'): ThinkingClearing {
  if (keep === 'all') return { messages: [...messages], turns: 0, tokens: 0 }
  // each assistant message's turn, counted from the newest (0)
  const turnOf = new Array<number>(messages.length).fill(-1)
  let turn = 0
  let seen = false
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message
    if (m.role === 'assistant') {
      turnOf[i] = turn
      seen = true
    } else if (isPromptMessage(m) && seen) {
      turn++
      seen = false
    }
  }
  const out = [...messages]
  const cleared = new Set<number>()
  let tokens = 0
  out.forEach((m, i) => {
    const t = turnOf[i] ?? -1
    if (t < keep || typeof m.content === 'string' || !m.content.some((b) => THINKING.has(b.type))) return
    const kept = m.content.filter((b) => !THINKING.has(b.type))
    const next: Message = { ...m, content: kept.length > 0 ? kept : [{ type: 'text', text: '(thinking cleared)' }] }
    tokens += rawMessageTokens(m) - rawMessageTokens(next)
    out[i] = next
    cleared.add(t)
  })
  return { messages: out, turns: cleared.size, tokens: Math.max(0, Math.round(tokens)) }
}
