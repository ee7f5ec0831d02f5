/**
 * The Responses API's compaction, performed by the gateway for an upstream that does not have it:
 * `context_management: [{type: "compaction", compact_threshold}]` on `POST /v1/responses` (past the
 * threshold the input is compacted and the answer's output opens with a `compaction` item), and
 * `POST /v1/responses/compact` answered by the gateway (the input's user messages, then one `compaction`
 * item). The item's `encrypted_content` is the compacted input sealed by the gateway (item-seal.ts), which it reads
 * back on the next request (the items before the newest such item are dropped, as the API's latency tip
 * allows, and the item stands for them); it never reaches an upstream.
 */
import { createHash } from 'node:crypto'
import type { Transform } from 'node:stream'
import { byEvents, wholeBody } from './events.js'
import { InvalidRequestError } from '../contract/errors.js'
import { SEALED_ITEM, type TenantSeal, UNSEALED_ITEM } from './item-seal.js'

/** The key of the gateway's encodings, as its bytes (sealed or an earlier build's): a body without it is never searched for an item. */
export const OWN_ITEM_KEY = Buffer.from('"cgw')

export interface CompactionItem {
  type: 'compaction'
  id: string
  encrypted_content: string
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The item standing for a compacted input (`items`: the input as it was forwarded, compacted), sealed for its tenant. */
export function compactionItem(items: readonly unknown[], seal: TenantSeal): CompactionItem {
  const encrypted = seal.seal(JSON.stringify(items))
  return {
    type: 'compaction',
    id: `cmp_gw${createHash('sha256').update(encrypted).digest('hex').slice(0, 24)}`,
    encrypted_content: encrypted
  }
}

/**
 * The input an item of the gateway's own stands for; undefined for another's (the API's own). One that says
 * it is the gateway's but does not open (changed, sealed for another tenant or by another key, an earlier
 * build's unsealed one) is refused, naming its field.
 */
function itemsOf(item: Record<string, unknown>, seal: TenantSeal, index: number): unknown[] | undefined {
  const encoded = item.encrypted_content
  if (item.type !== 'compaction' || typeof encoded !== 'string') return undefined
  const path = `/input/${index}/encrypted_content`
  if (encoded.startsWith(UNSEALED_ITEM))
    throw new InvalidRequestError(
      `input[${index}].encrypted_content: an unsealed compaction item of an earlier build of the gateway, no longer read; compact the conversation again`,
      path
    )
  if (!encoded.startsWith(SEALED_ITEM)) return undefined
  const text = seal.open(encoded)
  let items: unknown
  try {
    items = text === undefined ? undefined : (JSON.parse(text) as unknown)
  } catch {
    items = undefined
  }
  if (!Array.isArray(items) || !items.every(isObject))
    throw new InvalidRequestError(
      `input[${index}].encrypted_content: not a compaction item this gateway sealed for this API key (changed, or sealed by another key or gateway)`,
      path
    )
  return items
}

/** An input read from the gateway's newest compaction item on: the item and what precedes it replaced by the input it stands for. */
export function readBackItems(input: readonly unknown[], seal: TenantSeal): { input: unknown[]; read: boolean } {
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i]
    if (!isObject(item) || item.type !== 'compaction') continue
    const items = itemsOf(item, seal, i)
    if (items) return { input: [...items, ...input.slice(i + 1)], read: true }
    break
  }
  return { input: [...input], read: false }
}

/** `context_management` of a Responses request: the threshold of its compaction, checked (a 400 naming the field), or undefined where it asks for none. */
export function readResponsesContextManagement(body: Record<string, unknown>): { threshold: number } | undefined {
  const field = body.context_management
  if (field === undefined || field === null) return undefined
  if (!Array.isArray(field)) throw new InvalidRequestError('context_management: must be an array of context management entries', '/context_management')
  let threshold: number | undefined
  field.forEach((entry: unknown, i: number) => {
    const path = `/context_management/${i}`
    if (!isObject(entry)) throw new InvalidRequestError(`context_management[${i}]: must be an object`, path)
    if (entry.type !== 'compaction') throw new InvalidRequestError(`context_management[${i}].type: must be "compaction"`, `${path}/type`)
    for (const key of Object.keys(entry))
      if (key !== 'type' && key !== 'compact_threshold') throw new InvalidRequestError(`context_management[${i}].${key}: unknown parameter`, `${path}/${key}`)
    const t = entry.compact_threshold
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 1)
      throw new InvalidRequestError(`context_management[${i}].compact_threshold: must be a positive integer (tokens)`, `${path}/compact_threshold`)
    threshold = t
  })
  return threshold === undefined ? undefined : { threshold }
}

/** The gateway's answer to `POST /v1/responses/compact`: the input's user messages, then the compaction item. */
export function compactedResponse(
  input: readonly unknown[],
  item: CompactionItem,
  usage: { input_tokens: number; output_tokens: number },
  nowS: number
): Record<string, unknown> {
  const users = input.filter((i) => isObject(i) && i.role === 'user' && (i.type === undefined || i.type === 'message'))
  return {
    id: `resp_${item.id.slice(4)}`,
    object: 'response.compaction',
    created_at: nowS,
    output: [...users, item],
    usage: {
      input_tokens: usage.input_tokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.output_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input_tokens + usage.output_tokens
    }
  }
}

/**
 * A Responses answer with the compaction item first in its output: in the JSON of a response, or in a
 * stream as the item's own `response.output_item.added` and `.done` events, before the first event of an
 * output item, every other item's `output_index` one on, and the item first in a final response's `output`.
 */
export function withCompactionItem(stream: boolean, item: CompactionItem): Transform {
  if (!stream) {
    return wholeBody((bytes) => {
      try {
        const parsed = JSON.parse(bytes.toString('utf8')) as unknown
        if (isObject(parsed) && parsed.object === 'response' && Array.isArray(parsed.output))
          return Buffer.from(JSON.stringify({ ...parsed, output: [item, ...parsed.output] }))
      } catch {
        // not a response (an error the upstream sent): as it came
      }
      return undefined
    })
  }
  let inserted = false
  const own = (sequence: unknown): string => {
    const seq = typeof sequence === 'number' ? { sequence_number: sequence } : {}
    return (
      `event: response.output_item.added\ndata: ${JSON.stringify({ type: 'response.output_item.added', output_index: 0, item, ...seq })}\n\n` +
      `event: response.output_item.done\ndata: ${JSON.stringify({ type: 'response.output_item.done', output_index: 0, item, ...seq })}\n\n`
    )
  }
  const rewrite = (event: string): string => {
    const match = /^data: ?(.*)$/m.exec(event)
    if (!match) return event
    let data: Record<string, unknown>
    try {
      data = JSON.parse(match[1] as string) as Record<string, unknown>
    } catch {
      return event
    }
    let next = data
    if (typeof data.output_index === 'number') next = { ...next, output_index: data.output_index + 1 }
    if (isObject(data.response) && Array.isArray(data.response.output) && (data.type === 'response.completed' || data.type === 'response.incomplete')) {
      next = { ...next, response: { ...data.response, output: [item, ...data.response.output] } }
    }
    const before =
      !inserted && (typeof data.output_index === 'number' || data.type === 'response.completed' || data.type === 'response.incomplete')
        ? own(data.sequence_number)
        : ''
    if (before) inserted = true
    return next === data ? `${before}${event}` : `${before}${event.replace(match[0], `data: ${JSON.stringify(next)}`)}`
  }
  return byEvents(rewrite)
}
