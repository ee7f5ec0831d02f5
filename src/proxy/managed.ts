/**
 * The providers' own context management asked of the gateway, performed on a proxied body before the proxy
 * reads it: the Messages API's `context_management` edits (context-management.ts), and the Responses API's
 * compaction (responses-compaction.ts). Each takes its field out of the body it forwards.
 */
import { ProxiedBody } from './body.js'
import { topLevelField } from './events.js'
import { readMessagesRequest } from './request.js'
import { OWN_ITEM_KEY, readBackItems, readResponsesContextManagement } from './responses-compaction.js'
import {
  type CompactEdit,
  type ContextManagement,
  type EditedMessages,
  applyContextEdits,
  fromCompaction,
  readContextManagement
} from './context-management.js'
import { jsonBytes } from '../contract/wire.js'
import type { TenantSeal } from './item-seal.js'
import { unbindThinking } from '../compaction/index.js'

/** A request whose context management the gateway performed: the body to go on with, what the edits did, and the compaction asked for. */
export interface Managed {
  body: ProxiedBody
  edited: EditedMessages
  compact: CompactEdit | undefined
  /** No edit could change the body (read from its bytes): the answer goes as the upstream gave it (`context_management` absent, nothing applied). */
  quiet?: true
}

/** The key of the field, as its bytes: a body without it is never parsed for it. */
export const CONTEXT_MANAGEMENT_KEY = Buffer.from('"context_management"')

/**
 * The Messages API's context editing, performed by the gateway where the request asks for it: the body
 * edited and without the field, or undefined where there is nothing to perform (no field; a
 * `compact_20260112` edit, forwarded untouched).
 */
export function manageContext(body: ProxiedBody, seal: TenantSeal, recallNote: (toolUseId: string) => string, toolAdded = false): Managed | undefined {
  // Most requests ask for edits that can do nothing to them (Claude Code's keep-all thinking, a trigger far
  // above the body): the field is taken out of the bytes, the rest goes on as it came, unparsed. (The
  // search for it is the one scan of a body without it.)
  const field = topLevelField(body.bytes, 'context_management')
  if (!field) return undefined
  let asked: unknown
  try {
    asked = JSON.parse(field.value.toString('utf8'))
  } catch {
    asked = undefined
  }
  const quick = asked === undefined ? undefined : readContextManagement({ context_management: asked })
  if (quick && nothingToDo(quick, body))
    return { body: body.without(field.without), edited: { messages: [], applied: [], cleared: [] }, compact: quick.compact, quiet: true }
  const value = body.value()
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const management = readContextManagement(value as Record<string, unknown>)
  if (management === undefined) return undefined
  const { context_management: _performed, ...rest } = value as Record<string, unknown>
  const parts = readMessagesRequest(value)
  // with compaction asked for, a history is read from its newest compaction block on, as the API reads it
  const read = management.compact ? { ...parts, messages: fromCompaction(parts.messages, seal).messages } : parts
  const edited = applyContextEdits(read, management.edits, recallNote, toolAdded)
  return { body: new ProxiedBody(Buffer.from(jsonBytes({ ...rest, messages: edited.messages }))), edited, compact: management.compact }
}

/** A Responses request whose compaction the gateway performs: the body to go on with (read from its newest own item on), and the threshold asked for. */
export interface ManagedResponses {
  body: ProxiedBody
  threshold: number | undefined
}

/** The Responses API's compaction, performed by the gateway where asked for or where the input holds its own item; undefined where neither. */
export function manageResponses(body: ProxiedBody, seal: TenantSeal): ManagedResponses | undefined {
  if (!body.bytes.includes(OWN_ITEM_KEY) && !body.bytes.includes(CONTEXT_MANAGEMENT_KEY)) return undefined
  const value = body.value('input')
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const fields = value as Record<string, unknown>
  const asked = readResponsesContextManagement(fields)
  const back = Array.isArray(fields.input) ? readBackItems(fields.input, seal) : { input: fields.input, read: false }
  if (!asked && !back.read) return undefined
  const { context_management: _performed, ...rest } = fields
  return { body: new ProxiedBody(Buffer.from(JSON.stringify({ ...rest, input: back.input }))), threshold: asked?.threshold }
}

/** Whether no edit asked for could change this body, read from its bytes alone. */
function nothingToDo(management: ContextManagement, body: ProxiedBody): boolean {
  const { bytes } = body
  if (management.compact && bytes.includes(COMPACTION_TYPE)) return false
  return management.edits.every((edit) =>
    edit.type === 'clear_thinking_20251015'
      ? edit.keep === 'all' || !bytes.includes(THINKING_TYPE)
      : edit.trigger.type === 'input_tokens' && body.farUnder(edit.trigger.value)
  )
}

/** The bytes that say a history may hold a compaction block, or thinking. */
const COMPACTION_TYPE = Buffer.from('"compaction"')
const THINKING_TYPE = Buffer.from('thinking"')

/** The key a `compaction` block (or compaction on demand's field) has, as its bytes: a body without it is never parsed for one. */
export const COMPACTION_KEY = Buffer.from('"compaction"')

/**
 * A history that holds a `compaction` block (compaction on demand's, or another's), read from its newest one
 * on as the API reads it, for an upstream without the API's compaction: the gateway's own block stands for the
 * history it encoded, another's for its summary. On a model that checks thinking against its prefix, the turns
 * kept after the block lose their thinking: it was produced on the history the block replaced. Undefined where
 * the body holds no block.
 */
export function readBackCompaction(body: ProxiedBody, seal: TenantSeal): ProxiedBody | undefined {
  if (!body.bytes.includes(COMPACTION_KEY)) return undefined
  const value = body.value()
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const parts = readMessagesRequest(value)
  const back = fromCompaction(parts.messages, seal)
  if (!back.read) return undefined
  const messages = parts.unbindThinking ? unbindThinking(back.messages, [{ from: 0, bound: back.messages.length }]).messages : back.messages
  return new ProxiedBody(Buffer.from(jsonBytes({ ...(value as Record<string, unknown>), messages })))
}
