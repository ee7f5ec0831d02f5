/**
 * The Messages API's context editing (`context_management.edits`), performed by the gateway for any
 * upstream model: `clear_tool_uses_20250919` and `clear_thinking_20251015`, read and checked as the API
 * documents them, applied to the request's messages, the field and the beta value it needs taken out of
 * what goes upstream, and `context_management.applied_edits` given in the answer (its JSON, or the stream's
 * `message_delta`). Pure but for the answer's rewriting, which is a stream transform.
 */
import type { Transform } from 'node:stream'
import { byEvents, wholeBody } from './events.js'
import { type ClearedUse, type Message, clearThinking, clearToolUses, promptTokens, unbindThinking } from '../compaction/index.js'
import { InvalidRequestError } from '../contract/errors.js'
import type { ProxyParts } from './request.js'
import { SEALED_ITEM, type TenantSeal } from './item-seal.js'

/** How a cleared result's placeholder says its output can be found again (the gateway keeps it in the session's cold layer). */

/** The beta values of the edits the gateway performs: taken out of `anthropic-beta` when it performs them. */
export const CONTEXT_MANAGEMENT_BETAS = ['context-management-2025-06-27', 'compact-2026-01-12'] as const

/** The API's documented defaults. */
export const CLEAR_TOOL_USES_DEFAULTS = { triggerInputTokens: 100_000, keepToolUses: 3 } as const
export const CLEAR_THINKING_DEFAULT_KEEP = 1

export interface ClearToolUsesEdit {
  type: 'clear_tool_uses_20250919'
  trigger: { type: 'input_tokens' | 'tool_uses'; value: number }
  keep: number
  clearAtLeast: number
  excludeTools: string[]
  clearInputs: boolean | string[]
}
export interface ClearThinkingEdit {
  type: 'clear_thinking_20251015'
  keep: number | 'all'
}
export type ContextEdit = ClearToolUsesEdit | ClearThinkingEdit
/** `compact_20260112`: the history past `trigger` input tokens compacted, its summary a `compaction` block first in the answer. */
export interface CompactEdit {
  trigger: number
  pauseAfterCompaction: boolean
  instructions: string | undefined
}
/** A request's context management as the gateway performs it. */
export interface ContextManagement {
  edits: ContextEdit[]
  compact: CompactEdit | undefined
}

/** The API's default trigger of `compact_20260112`. */
export const COMPACT_DEFAULT_TRIGGER = 150_000

/** An edit applied, as the answer's `context_management.applied_edits` lists it. */
export type AppliedEdit =
  | { type: 'clear_tool_uses_20250919'; cleared_tool_uses: number; cleared_input_tokens: number }
  | { type: 'clear_thinking_20251015'; cleared_thinking_turns: number; cleared_input_tokens: number }

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A 400 in the API's words, naming the field by its dotted path as the API does, and its JSON pointer. */
function invalid(path: (string | number)[], message: string): InvalidRequestError {
  return new InvalidRequestError(`${path.join('.')}: ${message}`, `/${path.join('/')}`)
}

function onlyFields(value: Record<string, unknown>, path: (string | number)[], allowed: readonly string[]): void {
  for (const key of Object.keys(value)) if (!allowed.includes(key)) throw invalid([...path, key], 'Extra inputs are not permitted')
}

function count(value: unknown, path: (string | number)[], type: readonly string[], min: number): { type: string; value: number } {
  if (!isObject(value)) throw invalid(path, `Input should be an object with a type (${type.join(' or ')}) and a value`)
  onlyFields(value, path, ['type', 'value'])
  if (typeof value.type !== 'string' || !type.includes(value.type))
    throw invalid([...path, 'type'], `Input should be ${type.map((t) => `'${t}'`).join(' or ')}`)
  if (typeof value.value !== 'number' || !Number.isInteger(value.value)) throw invalid([...path, 'value'], 'Input should be a valid integer')
  if (value.value < min) throw invalid([...path, 'value'], `Input should be greater than or equal to ${min}`)
  return { type: value.type, value: value.value }
}

function names(value: unknown, path: (string | number)[]): string[] {
  if (!Array.isArray(value) || value.some((n) => typeof n !== 'string')) throw invalid(path, 'Input should be a valid list of tool names')
  return value as string[]
}

/**
 * The request's `context_management`, read and checked (a 400 naming the field where it breaks the API's
 * rules); undefined where the request has none.
 */
export function readContextManagement(body: Record<string, unknown>): ContextManagement | undefined {
  const field = body.context_management
  if (field === undefined || field === null) return undefined
  const root = ['context_management']
  if (!isObject(field)) throw invalid(root, 'Input should be a valid object')
  onlyFields(field, root, ['edits'])
  if (field.edits === undefined || field.edits === null) return { edits: [], compact: undefined }
  if (!Array.isArray(field.edits)) throw invalid([...root, 'edits'], 'Input should be a valid list')
  const edits: ContextEdit[] = []
  let compact: CompactEdit | undefined
  field.edits.forEach((edit: unknown, i: number) => {
    const path = [...root, 'edits', i]
    if (!isObject(edit)) throw invalid(path, 'Input should be a valid object')
    if (edit.type === 'compact_20260112') {
      // (its fields are checked before it is found twice, as the API checks them)
      onlyFields(edit, path, COMPACT_FIELDS)
      if (compact) throw invalid([...path, 'type'], 'compact_20260112 is given twice')
      compact = readCompactEdit(edit, path)
      return
    }
    if (edit.type === 'clear_tool_uses_20250919') edits.push(readClearToolUses(edit, path))
    else if (edit.type === 'clear_thinking_20251015') edits.push(readClearThinking(edit, path))
    else throw invalid([...path, 'type'], "Input should be 'clear_tool_uses_20250919', 'clear_thinking_20251015' or 'compact_20260112'")
    if (edits.filter((e) => e.type === edits[edits.length - 1]?.type).length > 1) throw invalid([...path, 'type'], `${String(edit.type)} is given twice`)
  })
  // the API applies thinking clearing first, and asks for it to be listed so
  const listed = (field.edits as unknown[]).map((e) => (isObject(e) ? e.type : undefined))
  const thinking = listed.indexOf('clear_thinking_20251015')
  if (thinking > 0) throw invalid([...root, 'edits', thinking], 'clear_thinking_20251015 must be the first edit when edits are combined')
  return { edits, compact }
}

/** A `clear_tool_uses_20250919` edit, its defaults filled in. */
function readClearToolUses(edit: Record<string, unknown>, path: (string | number)[]): ClearToolUsesEdit {
  onlyFields(edit, path, ['type', 'trigger', 'keep', 'clear_at_least', 'exclude_tools', 'clear_tool_inputs'])
  const trigger =
    edit.trigger === undefined || edit.trigger === null
      ? { type: 'input_tokens', value: CLEAR_TOOL_USES_DEFAULTS.triggerInputTokens }
      : count(edit.trigger, [...path, 'trigger'], ['input_tokens', 'tool_uses'], 1)
  const keep =
    edit.keep === undefined || edit.keep === null ? CLEAR_TOOL_USES_DEFAULTS.keepToolUses : count(edit.keep, [...path, 'keep'], ['tool_uses'], 0).value
  const clearAtLeast =
    edit.clear_at_least === undefined || edit.clear_at_least === null ? 0 : count(edit.clear_at_least, [...path, 'clear_at_least'], ['input_tokens'], 0).value
  const excludeTools = edit.exclude_tools === undefined || edit.exclude_tools === null ? [] : names(edit.exclude_tools, [...path, 'exclude_tools'])
  const inputs = edit.clear_tool_inputs
  if (inputs !== undefined && inputs !== null && typeof inputs !== 'boolean') names(inputs, [...path, 'clear_tool_inputs'])
  return {
    type: 'clear_tool_uses_20250919',
    trigger: trigger as ClearToolUsesEdit['trigger'],
    keep,
    clearAtLeast,
    excludeTools,
    clearInputs: (inputs ?? false) as boolean | string[]
  }
}

/** A `clear_thinking_20251015` edit: the thinking turns it keeps, or all. */
function readClearThinking(edit: Record<string, unknown>, path: (string | number)[]): ContextEdit {
  onlyFields(edit, path, ['type', 'keep'])
  const k = edit.keep
  let keep: number | 'all' = CLEAR_THINKING_DEFAULT_KEEP
  if (k === 'all' || (isObject(k) && k.type === 'all' && Object.keys(k).length === 1)) keep = 'all'
  else if (k !== undefined && k !== null) keep = count(k, [...path, 'keep'], ['thinking_turns'], 1).value
  return { type: 'clear_thinking_20251015', keep }
}

/** The fields a `compact_20260112` edit may have. */
const COMPACT_FIELDS = ['type', 'trigger', 'pause_after_compaction', 'instructions']

/** A `compact_20260112` edit: its trigger, whether to pause after the compaction, and its instructions. */
function readCompactEdit(edit: Record<string, unknown>, path: (string | number)[]): CompactEdit {
  onlyFields(edit, path, COMPACT_FIELDS)
  const trigger =
    edit.trigger === undefined || edit.trigger === null ? COMPACT_DEFAULT_TRIGGER : count(edit.trigger, [...path, 'trigger'], ['input_tokens'], 1).value
  const pause = edit.pause_after_compaction ?? false
  if (typeof pause !== 'boolean') throw invalid([...path, 'pause_after_compaction'], 'Input should be a valid boolean')
  const instructions = edit.instructions ?? undefined
  if (instructions !== undefined && typeof instructions !== 'string') throw invalid([...path, 'instructions'], 'Input should be a valid string')
  return { trigger, pauseAfterCompaction: pause, instructions: instructions?.trim() ? instructions : undefined }
}

/** Compaction on demand's beta. */
export const ON_DEMAND_BETA = 'compact-2026-09-04'

/** The longest `instructions` a summary call takes (the compaction request's own bound). */
const MAX_INSTRUCTIONS = 4_000

/**
 * A request's `compaction` (compaction on demand: the whole of `messages` summarized into one `compaction`
 * block, nothing sampled), read and checked as the API checks it: a 400 naming the field or the message where
 * it breaks a rule. `instructions` replace the summary prompt's focus; empty or blank counts as absent.
 */
export function readOnDemand(body: Record<string, unknown>, beta: string | undefined): { instructions: string | undefined } {
  const root = ['compaction']
  const field = body.compaction
  const betas = (beta ?? '').split(',').map((v) => v.trim())
  if (!betas.includes(ON_DEMAND_BETA))
    throw invalid(root, `Extra inputs are not permitted (compaction on demand takes the beta header anthropic-beta: ${ON_DEMAND_BETA})`)
  if (!isObject(field)) throw invalid(root, 'Input should be a valid object')
  onlyFields(field, root, ['type', 'instructions'])
  if (field.type !== 'summarize') throw invalid([...root, 'type'], "Input should be 'summarize'")
  const instructions = field.instructions
  if (instructions !== undefined && instructions !== null && typeof instructions !== 'string')
    throw invalid([...root, 'instructions'], 'Input should be a valid string')
  if (typeof instructions === 'string' && instructions.trim().length > MAX_INSTRUCTIONS)
    throw invalid([...root, 'instructions'], `String should have at most ${MAX_INSTRUCTIONS} characters`)
  if (body.context_management !== undefined && body.context_management !== null) throw invalid(root, 'cannot be combined with `context_management`')
  const messages = Array.isArray(body.messages) ? (body.messages as unknown[]) : []
  let last = messages.length - 1
  while (last >= 0 && isObject(messages[last]) && (messages[last] as Record<string, unknown>).role === 'system') last--
  const final = messages[last]
  if (isObject(final) && final.role === 'assistant' && Array.isArray(final.content) && final.content.some((b) => isObject(b) && b.type === 'tool_use'))
    throw invalid(
      ['messages', last],
      'the messages to compact end in an assistant turn whose tool call has no result: put the cut where every tool call has its result'
    )
  return { instructions: typeof instructions === 'string' && instructions.trim() !== '' ? instructions.trim() : undefined }
}

/** A `compaction` block as the answer gives it: the summary to read, and the compacted history the gateway reads back. */
export interface CompactionBlock {
  type: 'compaction'
  content: string | null
  encrypted_content: string | null
  /** Compaction on demand's: the gateway's sealed history too (the SDKs' streams keep `encrypted_content`, the API's blocks carry a signature). */
  signature?: string
}

/** The block of a compaction whose forwarded history is `messages` (its first, the summary turn), the history sealed for its tenant. */
export function compactionBlock(messages: readonly Message[], seal: TenantSeal): CompactionBlock {
  const first = messages[0]
  const content =
    first === undefined
      ? ''
      : typeof first.content === 'string'
        ? first.content
        : first.content
            .map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : ''))
            .filter(Boolean)
            .join('\n\n')
  return { type: 'compaction', content, encrypted_content: seal.seal(JSON.stringify(messages)) }
}

/**
 * Compaction on demand's block of a compaction whose compacted history is `messages`: its summary to read
 * (null where nothing could be summarized: the API's failed compaction, a no-op), the gateway's sealed
 * history as its signature and its `encrypted_content` both.
 */
export function onDemandBlock(messages: readonly Message[] | undefined, seal: TenantSeal): CompactionBlock {
  if (messages === undefined) return { type: 'compaction', content: null, encrypted_content: null }
  const block = compactionBlock(messages, seal)
  return { ...block, signature: block.encrypted_content as string }
}

/**
 * The history a block of the gateway's own stands for (sealed, in its `encrypted_content` or `signature`);
 * undefined for another's, and for an earlier build's unsealed one (read by its summary, as another's is).
 * One that says it is sealed by the gateway but does not open is refused, naming its field.
 */
function ownHistory(block: Record<string, unknown>, seal: TenantSeal, path: (string | number)[]): Message[] | undefined {
  const field = (['encrypted_content', 'signature'] as const).find((f) => typeof block[f] === 'string' && (block[f] as string).startsWith(SEALED_ITEM))
  if (field === undefined) return undefined
  const text = seal.open(block[field] as string)
  let messages: unknown
  try {
    messages = text === undefined ? undefined : (JSON.parse(text) as unknown)
  } catch {
    messages = undefined
  }
  const valid =
    Array.isArray(messages) &&
    messages.length > 0 &&
    messages.every(
      (m: unknown) =>
        isObject(m) && (m.role === 'user' || m.role === 'assistant' || m.role === 'system') && (typeof m.content === 'string' || Array.isArray(m.content))
    )
  if (!valid) throw invalid([...path, field], 'not a compaction block this gateway sealed for this API key (changed, or sealed by another key or gateway)')
  return messages as Message[]
}

/**
 * A history that holds a `compaction` block, read from the newest such block on, as the API reads it: what
 * precedes the block is dropped, and the block stands for it (the gateway's own, by the history it encoded;
 * another's, by its summary as a user turn; one with no content is a no-op and only goes). A history without
 * one is as it came. No block ever goes upstream.
 */
export function fromCompaction(messages: readonly Message[], seal: TenantSeal): { messages: Message[]; read: boolean } {
  let at = -1
  let block = -1
  for (let i = messages.length - 1; i >= 0 && at < 0; i--) {
    const m = messages[i] as Message
    if (m.role !== 'assistant' || typeof m.content === 'string') continue
    for (let j = m.content.length - 1; j >= 0; j--) {
      if (m.content[j]?.type === 'compaction') {
        at = i
        block = j
        break
      }
    }
  }
  if (at < 0) return { messages: [...messages], read: false }
  const holder = messages[at] as Message
  const blocks = holder.content as Record<string, unknown>[]
  const found = blocks[block] as Record<string, unknown>
  const rest = (blocks.slice(block + 1) as Message['content'] & unknown[]).filter((b) => (b as { type?: unknown }).type !== 'compaction')
  const after = [...(rest.length > 0 ? [{ ...holder, content: rest } as Message] : []), ...messages.slice(at + 1)]
  const own = ownHistory(found, seal, ['messages', at, 'content', block])
  if (own) return { messages: [...own, ...after], read: true }
  if (typeof found.content === 'string' && found.content !== '')
    return { messages: [{ role: 'user', content: [{ type: 'text', text: found.content }] }, ...after], read: true }
  // a failed compaction (no content): a no-op, the block alone goes
  const before = messages.slice(0, at).map((m) => (typeof m.content === 'string' ? m : { ...m, content: m.content.filter((b) => b.type !== 'compaction') }))
  return { messages: [...before, ...after], read: true }
}

/** What the edits did to a request: its messages after them, what each applied edit reports, and the uses cleared. */
export interface EditedMessages {
  messages: Message[]
  applied: AppliedEdit[]
  cleared: ClearedUse[]
}

/**
 * The edits applied in order to the request's messages, each only when its trigger is reached (on the
 * request as the edits before it left it). `recallNote` names, for a cleared use, where its output is kept.
 */
export function applyContextEdits(
  parts: ProxyParts,
  edits: readonly ContextEdit[],
  recallNote: (toolUseId: string) => string,
  /** A clearing adds the recall tool to the request: every thinking block before it was made on another prefix. */
  toolAdded = false
): EditedMessages {
  let messages = parts.messages
  const applied: AppliedEdit[] = []
  const cleared: ClearedUse[] = []
  for (const edit of edits) {
    if (edit.type === 'clear_thinking_20251015') {
      const done = clearThinking(messages, edit.keep)
      if (done.turns === 0) continue
      messages = done.messages
      applied.push({ type: edit.type, cleared_thinking_turns: done.turns, cleared_input_tokens: done.tokens })
      continue
    }
    const reached =
      edit.trigger.type === 'input_tokens'
        ? promptTokens(messages, parts.system, parts.tools) >= edit.trigger.value
        : messages.reduce((n, m) => n + (typeof m.content === 'string' ? 0 : m.content.filter((b) => b.type === 'tool_use').length), 0) >= edit.trigger.value
    if (!reached) continue
    const done = clearToolUses(
      messages,
      { keep: edit.keep, excludeTools: edit.excludeTools, clearInputs: edit.clearInputs, clearAtLeast: edit.clearAtLeast },
      recallNote
    )
    if (done.cleared.length === 0) continue
    messages = done.messages
    cleared.push(...done.cleared)
    applied.push({ type: edit.type, cleared_tool_uses: done.cleared.length, cleared_input_tokens: done.tokens })
  }
  // On a model that checks thinking against its prefix, the edits (made afresh at each request) leave no
  // thinking after their first change: what was produced after it was produced on another prefix.
  if (parts.unbindThinking && applied.length > 0) {
    const from = toolAdded && cleared.length > 0 ? 0 : firstChange(parts.messages, messages)
    messages = unbindThinking(messages, [{ from, bound: messages.length }]).messages
  }
  return { messages, applied, cleared }
}

/** The first message of `after` that is not the same as in `before`. */
function firstChange(before: readonly Message[], after: readonly Message[]): number {
  for (let i = 0; i < after.length; i++) {
    const a = after[i]
    const b = before[i]
    if (a !== b && JSON.stringify(a) !== JSON.stringify(b)) return i
  }
  return after.length
}

/** The `anthropic-beta` header without the values of the edits the gateway performed (absent where none is left). */
export function withoutConsumedBetas(headers: Record<string, string>): Record<string, string> {
  const beta = headers['anthropic-beta']
  if (beta === undefined) return headers
  const left = beta
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '' && !(CONTEXT_MANAGEMENT_BETAS as readonly string[]).includes(v))
  const { 'anthropic-beta': _dropped, ...rest } = headers
  return left.length > 0 ? { ...rest, 'anthropic-beta': left.join(',') } : rest
}

/** What a compaction's summary call took, as the answer's `usage.iterations` gives it (not counted in the top-level usage). */
export interface CompactionUsage {
  input_tokens: number
  output_tokens: number
}

function iteration(usage: CompactionUsage): Record<string, unknown> {
  return {
    type: 'compaction',
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: null
  }
}

/** A message's JSON with the compaction block first in its content, and the compaction's iteration before the message's own in its usage. */
function withBlock(message: Record<string, unknown>, compaction: { block: CompactionBlock; usage: CompactionUsage }): Record<string, unknown> {
  const content = Array.isArray(message.content) ? message.content : []
  const usage = isObject(message.usage) ? message.usage : undefined
  const own = usage
    ? {
        type: 'message',
        input_tokens: usage.input_tokens ?? 0,
        output_tokens: usage.output_tokens ?? 0,
        cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
        cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
        cache_creation: usage.cache_creation ?? null,
        model: message.model ?? null
      }
    : undefined
  return {
    ...message,
    content: [compaction.block, ...content],
    ...(usage ? { usage: { ...usage, iterations: [iteration(compaction.usage), own] } } : {})
  }
}

/** The events of a compaction block at index 0, as the API streams one. */
export function compactionEvents(block: CompactionBlock): string {
  const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`
  return (
    event('content_block_start', {
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'compaction', content: null, encrypted_content: null, ...(block.signature ? { signature: block.signature } : {}) }
    }) +
    event('content_block_delta', {
      type: 'content_block_delta',
      index: 0,
      delta: { type: 'compaction_delta', content: block.content, encrypted_content: block.encrypted_content }
    }) +
    event('content_block_stop', { type: 'content_block_stop', index: 0 })
  )
}

/** An event of the upstream's stream with the compaction block before its content: its blocks' indices one on, the block's events after `message_start`. */
function shiftedEvent(event: string, compaction: { block: CompactionBlock; usage: CompactionUsage }): string {
  const match = /^data: ?(.*)$/m.exec(event)
  if (!match) return event
  let data: Record<string, unknown>
  try {
    data = JSON.parse(match[1] as string) as Record<string, unknown>
  } catch {
    return event
  }
  if (data.type === 'message_start') return `${event}${compactionEvents(compaction.block)}`
  if (typeof data.index === 'number' && typeof data.type === 'string' && data.type.startsWith('content_block_')) {
    return event.replace(match[0], `data: ${JSON.stringify({ ...data, index: data.index + 1 })}`)
  }
  if (data.type === 'message_delta' && isObject(data.usage)) {
    const u = data.usage
    const own = {
      type: 'message',
      input_tokens: u.input_tokens ?? 0,
      output_tokens: u.output_tokens ?? 0,
      cache_creation_input_tokens: u.cache_creation_input_tokens ?? 0,
      cache_read_input_tokens: u.cache_read_input_tokens ?? 0,
      cache_creation: null,
      model: null
    }
    return event.replace(match[0], `data: ${JSON.stringify({ ...data, usage: { ...u, iterations: [iteration(compaction.usage), own] } })}`)
  }
  return event
}

/**
 * The gateway's own answer to a request whose compaction pauses (`pause_after_compaction`): the compaction
 * block alone, `stop_reason: "compaction"`, nothing sampled; a stream of it where one was asked for.
 */
export function pausedAnswer(
  model: unknown,
  stream: boolean,
  block: CompactionBlock,
  usage: CompactionUsage,
  applied: AppliedEdit[] | undefined
): { contentType: string; body: string } {
  const id = `msg_gw${Buffer.from((block.encrypted_content ?? `${Date.now()}${Math.random()}`).slice(-24))
    .toString('hex')
    .slice(0, 24)}`
  const management = applied ? { context_management: { applied_edits: applied } } : {}
  const zero = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  const message = {
    id,
    type: 'message',
    role: 'assistant',
    model: typeof model === 'string' ? model : 'unknown',
    content: [block],
    stop_reason: 'compaction',
    stop_sequence: null,
    usage: { ...zero, iterations: [iteration(usage)] },
    ...management
  }
  if (!stream) return { contentType: 'application/json', body: JSON.stringify(message) }
  const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`
  return {
    contentType: 'text/event-stream; charset=utf-8',
    body:
      event('message_start', {
        type: 'message_start',
        message: { ...message, content: [], stop_reason: null, ...(applied ? { context_management: null } : {}) }
      }) +
      compactionEvents(block) +
      event('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: 'compaction', stop_sequence: null },
        usage: { output_tokens: 0, iterations: [iteration(usage)] },
        ...management
      }) +
      event('message_stop', { type: 'message_stop' })
  }
}

/** One event with `context_management` set in its data where it is the message's `message_delta`; any other as it came. */
function rewriteEvent(event: string, field: unknown): string {
  if (!/^event: ?message_delta\s*$/m.test(event) && !event.includes('"message_delta"')) return event
  return event.replace(/^data: ?(.*)$/m, (line, data: string) => {
    try {
      const parsed = JSON.parse(data) as Record<string, unknown>
      if (parsed.type !== 'message_delta') return line
      return `data: ${JSON.stringify({ ...parsed, context_management: field })}`
    } catch {
      return line
    }
  })
}

/**
 * The answer with `context_management` in it, as the API gives it: `{applied_edits}` in the JSON of a
 * message (the body read whole, the only change) or in the stream's `message_delta` event (every other
 * event's bytes as they came, each event passed on when it is whole); a token count's
 * `{original_input_tokens}`, the count before the edits (the upstream's count of what was sent, and the
 * gateway's estimate of what the edits took out).
 */
export function withAppliedEdits(
  stream: boolean,
  field: { applied_edits: AppliedEdit[] },
  compaction?: { block: CompactionBlock; usage: CompactionUsage }
): Transform {
  const cleared = field.applied_edits.reduce((n, e) => n + e.cleared_input_tokens, 0)
  if (stream) return byEvents((event) => rewriteEvent(compaction ? shiftedEvent(event, compaction) : event, field))
  return wholeBody((bytes) => {
    try {
      const parsed = JSON.parse(bytes.toString('utf8')) as unknown
      if (isObject(parsed) && parsed.type === 'message')
        return Buffer.from(JSON.stringify({ ...(compaction ? withBlock(parsed, compaction) : parsed), context_management: field }))
      // a token count: what the request would have counted before the edits (the upstream's count and the gateway's estimate of what they took out)
      if (isObject(parsed) && parsed.type === undefined && typeof parsed.input_tokens === 'number') {
        return Buffer.from(JSON.stringify({ ...parsed, context_management: { original_input_tokens: parsed.input_tokens + cleared } }))
      }
    } catch {
      // not a message (an error the upstream sent): as it came
    }
    return undefined
  })
}
