/**
 * The Messages API's context editing (`context_management.edits`), performed by the gateway for any
 * upstream model: `clear_tool_uses_20250919` and `clear_thinking_20251015`, read and checked as the API
 * documents them, applied to the request's messages, the field and the beta value it needs taken out of
 * what goes upstream, and `context_management.applied_edits` given in the answer (its JSON, or the stream's
 * `message_delta`). Pure but for the answer's rewriting, which is a stream transform.
 */
import { Transform } from 'node:stream'
import { type ClearedUse, type Message, clearThinking, clearToolUses, promptTokens } from '../compaction/index.js'
import { InvalidRequestError } from '../contract/errors.js'
import type { ProxyParts } from './request.js'

/** The beta values of the edits the gateway performs: taken out of `anthropic-beta` when it performs them. */
export const CONTEXT_MANAGEMENT_BETAS = ['context-management-2025-06-27'] as const

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
  if (typeof value.type !== 'string' || !type.includes(value.type)) throw invalid([...path, 'type'], `Input should be ${type.map((t) => `'${t}'`).join(' or ')}`)
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
 * rules); undefined where the request has none; 'forward' where it asks for `compact_20260112`, which
 * this gateway does not perform (it compacts past its own budget with its own summary): such a request's
 * field goes upstream untouched, for an upstream that has it.
 */
export function readContextManagement(body: Record<string, unknown>): ContextEdit[] | 'forward' | undefined {
  const field = body.context_management
  if (field === undefined || field === null) return undefined
  const root = ['context_management']
  if (!isObject(field)) throw invalid(root, 'Input should be a valid object')
  onlyFields(field, root, ['edits'])
  if (field.edits === undefined || field.edits === null) return []
  if (!Array.isArray(field.edits)) throw invalid([...root, 'edits'], 'Input should be a valid list')
  const edits: ContextEdit[] = []
  if (field.edits.some((e: unknown) => isObject(e) && e.type === 'compact_20260112')) return 'forward'
  field.edits.forEach((edit: unknown, i: number) => {
    const path = [...root, 'edits', i]
    if (!isObject(edit)) throw invalid(path, 'Input should be a valid object')
    if (edit.type === 'clear_tool_uses_20250919') {
      onlyFields(edit, path, ['type', 'trigger', 'keep', 'clear_at_least', 'exclude_tools', 'clear_tool_inputs'])
      const trigger = edit.trigger === undefined || edit.trigger === null ? { type: 'input_tokens', value: CLEAR_TOOL_USES_DEFAULTS.triggerInputTokens } : count(edit.trigger, [...path, 'trigger'], ['input_tokens', 'tool_uses'], 1)
      const keep = edit.keep === undefined || edit.keep === null ? CLEAR_TOOL_USES_DEFAULTS.keepToolUses : count(edit.keep, [...path, 'keep'], ['tool_uses'], 0).value
      const clearAtLeast = edit.clear_at_least === undefined || edit.clear_at_least === null ? 0 : count(edit.clear_at_least, [...path, 'clear_at_least'], ['input_tokens'], 0).value
      const excludeTools = edit.exclude_tools === undefined || edit.exclude_tools === null ? [] : names(edit.exclude_tools, [...path, 'exclude_tools'])
      const inputs = edit.clear_tool_inputs
      if (inputs !== undefined && inputs !== null && typeof inputs !== 'boolean') names(inputs, [...path, 'clear_tool_inputs'])
      edits.push({ type: 'clear_tool_uses_20250919', trigger: trigger as ClearToolUsesEdit['trigger'], keep, clearAtLeast, excludeTools, clearInputs: (inputs ?? false) as boolean | string[] })
    } else if (edit.type === 'clear_thinking_20251015') {
      onlyFields(edit, path, ['type', 'keep'])
      const k = edit.keep
      let keep: number | 'all' = CLEAR_THINKING_DEFAULT_KEEP
      if (k === 'all' || (isObject(k) && k.type === 'all' && Object.keys(k).length === 1)) keep = 'all'
      else if (k !== undefined && k !== null) keep = count(k, [...path, 'keep'], ['thinking_turns'], 1).value
      edits.push({ type: 'clear_thinking_20251015', keep })
    } else {
      throw invalid([...path, 'type'], "Input should be 'clear_tool_uses_20250919', 'clear_thinking_20251015' or 'compact_20260112'")
    }
    if (edits.filter((e) => e.type === edits[edits.length - 1]?.type).length > 1) throw invalid([...path, 'type'], `${String(edit.type)} is given twice`)
  })
  // the API applies thinking clearing first, and asks for it to be listed so
  const thinking = edits.findIndex((e) => e.type === 'clear_thinking_20251015')
  if (thinking > 0) throw invalid([...root, 'edits', thinking], 'clear_thinking_20251015 must be the first edit when edits are combined')
  return edits
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
export function applyContextEdits(parts: ProxyParts, edits: readonly ContextEdit[], recallNote: (toolUseId: string) => string): EditedMessages {
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
    const done = clearToolUses(messages, { keep: edit.keep, excludeTools: edit.excludeTools, clearInputs: edit.clearInputs, clearAtLeast: edit.clearAtLeast }, recallNote)
    if (done.cleared.length === 0) continue
    messages = done.messages
    cleared.push(...done.cleared)
    applied.push({ type: edit.type, cleared_tool_uses: done.cleared.length, cleared_input_tokens: done.tokens })
  }
  return { messages, applied, cleared }
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

/** The end of the last complete event in `bytes` (after its blank line), or -1. */
function lastEventEnd(bytes: Buffer): number {
  const lf = bytes.lastIndexOf('\n\n')
  const crlf = bytes.lastIndexOf('\r\n\r\n')
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 4)
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
export function withAppliedEdits(stream: boolean, field: { applied_edits: AppliedEdit[] }): Transform {
  const cleared = field.applied_edits.reduce((n, e) => n + e.cleared_input_tokens, 0)
  if (!stream) {
    const chunks: Buffer[] = []
    return new Transform({
      transform(chunk: Buffer, _encoding, done) {
        chunks.push(chunk)
        done()
      },
      flush(done) {
        const bytes = Buffer.concat(chunks)
        try {
          const parsed = JSON.parse(bytes.toString('utf8')) as unknown
          if (isObject(parsed) && parsed.type === 'message') return done(null, Buffer.from(JSON.stringify({ ...parsed, context_management: field })))
          // a token count: what the request would have counted before the edits (the upstream's count and the gateway's estimate of what they took out)
          if (isObject(parsed) && parsed.type === undefined && typeof parsed.input_tokens === 'number') {
            return done(null, Buffer.from(JSON.stringify({ ...parsed, context_management: { original_input_tokens: parsed.input_tokens + cleared } })))
          }
        } catch {
          // not a message (an error the upstream sent): as it came
        }
        done(null, bytes)
      }
    })
  }
  let held: Buffer = Buffer.alloc(0)
  const rewrite = (bytes: Buffer): Buffer => {
    const text = bytes.toString('utf8')
    if (!text.includes('message_delta')) return bytes
    return Buffer.from(text.split(/(?<=\r?\n\r?\n)/).map((e) => rewriteEvent(e, field)).join(''))
  }
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const bytes = held.length > 0 ? Buffer.concat([held, chunk]) : chunk
      const end = lastEventEnd(bytes)
      if (end < 0) {
        held = bytes
        return done()
      }
      held = bytes.subarray(end)
      done(null, rewrite(bytes.subarray(0, end)))
    },
    flush(done) {
      done(null, held.length > 0 ? rewrite(held) : undefined)
    }
  })
}
