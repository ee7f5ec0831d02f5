/**
 * The proxy's recall tool on the Responses API (recall-tool.ts is the Messages API's, recall-chat.ts Chat
 * Completions'): the same rules in that API's items. A round's answer is a list of output items (reasoning,
 * messages, calls); a recall call is a `function_call` item of the tool, hidden from the client with every
 * event of its output index, the other items' indices renumbered where the client is; the continuation sends
 * the round's items as they came (with their encrypted reasoning) and a `function_call_output` each. What the
 * upstream saw in place of the client's answer (the run of items it sends back where its answer stands) is
 * put back on the next request. Pure: the relay does the I/O.
 */
import { responsesUsage } from './usage.js'
import { createHash } from 'node:crypto'
import { PROXY_RECALL_TOOL } from '../compaction/index.js'
import { RECALL_TOOL_DEFINITION, type RecallCall, type Usage, addUsage, emptyUsage } from './recall-tool.js'
import { type DataEvent, dataEvents } from './events.js'

type Item = Record<string, unknown>

/** The tool as the Responses API takes one (a function; not strict: `limit` may be left out). */
export const RESPONSES_RECALL_TOOL_DEFINITION = {
  type: 'function',
  name: RECALL_TOOL_DEFINITION.name,
  description: RECALL_TOOL_DEFINITION.description,
  parameters: RECALL_TOOL_DEFINITION.input_schema,
  strict: false
} as const

/** What the upstream saw in place of one answer the client got, in the Responses API's items. */
export interface ResponsesExchange {
  at: number
  visible: string
  /** Each round's output items (a list a round) and the outputs of its recall calls, as the upstream saw them. */
  rounds: (Item[] | Item)[]
  /** Outputs the client's next items must be preceded by (the last round's recall calls, answered). */
  pending: Item[]
}

/** The items a client runs for the model (their outputs come back from it); the API's own tools' calls are not among them. */
const CLIENT_CALLS = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'computer_call', 'shell_call', 'apply_patch_call'])

const typeOf = (i: Item): string => (typeof i.type === 'string' ? i.type : typeof i.role === 'string' ? 'message' : '')
const isRecall = (i: Item): boolean => typeOf(i) === 'function_call' && i.name === PROXY_RECALL_TOOL

/** Whether an item is part of an answer of the model's as the client sends it back (not a user's or a tool's output). */
function answerItem(i: Item): boolean {
  const type = typeOf(i)
  if (type === 'message') return i.role === 'assistant'
  return type === 'reasoning' || (type.endsWith('_call') && !type.endsWith('_output'))
}

/** A message item's text. */
function textOf(i: Item): string {
  if (typeof i.content === 'string') return i.content
  if (!Array.isArray(i.content)) return ''
  return (i.content as Item[]).map((p) => (typeof p.text === 'string' ? p.text : typeof p.refusal === 'string' ? p.refusal : '')).join('')
}

/**
 * What identifies an answer the client sends back: its messages' texts and its calls' ids, in order (a
 * client may leave out reasoning items, ids and statuses, or reorder keys).
 */
export function responsesFingerprint(items: readonly unknown[]): string {
  const parts = (items as Item[]).flatMap((i) => {
    const type = typeOf(i)
    if (type === 'message') return [['m', textOf(i)]]
    if (typeof i.call_id === 'string') return [['c', i.call_id]]
    return []
  })
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 32)
}

/** The client's input with every answer an exchange stands for put back as the upstream saw it (the run of answer items at its place). */
export function restoreResponses(items: readonly Item[], exchanges: readonly ResponsesExchange[]): { items: Item[]; restored: number } {
  if (exchanges.length === 0) return { items: [...items], restored: 0 }
  const places = new Set(exchanges.map((e) => e.at))
  const byPlace = new Map(exchanges.map((e) => [`${e.at}\u0000${e.visible}`, e]))
  const out: Item[] = []
  let restored = 0
  for (let i = 0; i < items.length;) {
    let end = i
    while (places.has(i) && end < items.length && answerItem(items[end] as Item)) end++
    const exchange = end > i ? byPlace.get(`${i}\u0000${responsesFingerprint(items.slice(i, end))}`) : undefined
    if (!exchange) {
      out.push(items[i] as Item)
      i++
      continue
    }
    out.push(...continuationItems(exchange.rounds).map((r) => structuredClone(r)), ...exchange.pending.map((p) => structuredClone(p)))
    restored++
    i = end
  }
  return { items: out, restored }
}

/** The recall calls of a round's items. */
export function responsesRecallCalls(items: readonly Item[]): RecallCall[] {
  return items.filter(isRecall).map((c) => {
    let input: { query?: unknown; limit?: unknown } = {}
    try {
      input = JSON.parse(typeof c.arguments === 'string' && c.arguments !== '' ? c.arguments : '{}') as typeof input
    } catch {
      // arguments that are not JSON: an empty query, answered as such
    }
    return { id: String(c.call_id ?? ''), query: typeof input.query === 'string' ? input.query : '', limit: input.limit }
  })
}

/** The items of a round the client sees: all but the recall calls. */
export function responsesVisible(items: readonly Item[]): Item[] {
  return items.filter((i) => !isRecall(i))
}

/** Whether a round calls one of the client's own tools. */
export function responsesCallsClient(items: readonly Item[]): boolean {
  return items.some((i) => CLIENT_CALLS.has(typeOf(i)) && !isRecall(i))
}

/** A result as the model reads it: the call's output item. */
export function responsesResult(callId: string, text: string): Item {
  return { type: 'function_call_output', call_id: callId, output: text }
}

/** The rounds' items as a continuation sends them and the next request puts them back: as they came, in order. */
export function continuationItems(rounds: readonly unknown[]): Item[] {
  return (rounds as (Item[] | Item)[]).flat()
}

/** A usage summed over rounds, in the Responses API's own fields (the last round's others kept). */
export function responsesUsageOf(last: unknown, total: Usage): Item {
  const input = total.input_tokens + total.cache_read_input_tokens
  const base = (last ?? {}) as Item
  return {
    ...base,
    input_tokens: input,
    input_tokens_details: { ...(base.input_tokens_details as Item | undefined), cached_tokens: total.cache_read_input_tokens },
    output_tokens: total.output_tokens,
    total_tokens: input + total.output_tokens
  }
}

type Event = DataEvent

/** A Responses stream's events. */
export const parseResponsesEvents = dataEvents

/** An event as the API writes one: its type named, its data numbered. */
export function responsesEventText(data: Item): string {
  return `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`
}

/** Where a turn's rounds stand on the client's side: output indices given, events numbered, the response it was told of. */
export interface ResponsesCursor {
  items: number
  sequence: number
  /** The first round's `response.created` response (its id is the turn's for the client). */
  response: Item | undefined
}

/**
 * One round of a streamed answer: the upstream's events in, the client's out. Every event of a recall call's
 * output index is held back; the others go on at once, their output indices renumbered from where the client
 * is and every event numbered in the client's sequence; a later round's `response.created` and
 * `response.in_progress` are not said again; the round's end (`response.completed`, `response.incomplete`) is
 * held for the turn's close.
 */
export class ResponsesRound {
  private readonly hidden = new Set<number>()
  private readonly clientIndex = new Map<number, number>()
  private readonly done = new Map<number, Item>()
  private shown = 0
  /** The round's held end, its response as the upstream gave it. */
  end: Item | undefined
  failed = false

  constructor(
    private readonly first: boolean,
    readonly cursor: ResponsesCursor
  ) {}

  get clientItems(): number {
    return this.cursor.items + this.shown
  }

  private out(data: Item): string {
    return responsesEventText({ ...data, sequence_number: this.cursor.sequence++ })
  }

  take(event: Event): string[] {
    const data = event.data
    if (!data) return [event.raw]
    const type = String(data.type ?? '')
    if (type === 'response.created' || type === 'response.in_progress' || type === 'response.queued') {
      if (type === 'response.created' && this.first) this.cursor.response = data.response as Item | undefined
      return this.first ? [this.out(data)] : []
    }
    if (type === 'response.completed' || type === 'response.incomplete') {
      this.end = data
      return []
    }
    if (type === 'response.failed' || type === 'error') {
      this.failed = true
      return [this.out(data)]
    }
    if (typeof data.output_index !== 'number') return [this.out(data)]
    const index = data.output_index
    if (type === 'response.output_item.added' && isRecall((data.item ?? {}) as Item)) this.hidden.add(index)
    if (type === 'response.output_item.done') this.done.set(index, data.item as Item)
    if (this.hidden.has(index)) return []
    let at = this.clientIndex.get(index)
    if (at === undefined) {
      at = this.cursor.items + this.shown++
      this.clientIndex.set(index, at)
    }
    return [this.out({ ...data, output_index: at })]
  }

  /** The round's output items as the upstream gave them (every call, the recall's too). */
  items(): Item[] {
    const output = (this.end?.response as Item | undefined)?.output
    if (Array.isArray(output)) return output as Item[]
    return [...this.done.entries()].sort(([a], [b]) => a - b).map(([, i]) => i)
  }

  usage(): Usage {
    return addUsage(emptyUsage(), responsesUsage((this.end?.response as Item | undefined)?.usage))
  }

  /** The turn's close: the held end with every visible item of the turn and the usage summed, under the response the client was told of. */
  closing(total: Usage, visible: readonly unknown[], reason?: 'ended'): string {
    const response = ((this.end?.response as Item | undefined) ?? this.cursor.response ?? { object: 'response' }) as Item
    const told = this.cursor.response
    const type = reason === 'ended' || !this.end ? 'response.completed' : String(this.end.type)
    return this.out({
      ...(this.end ?? {}),
      type,
      response: {
        ...response,
        ...(told?.id !== undefined ? { id: told.id } : {}),
        ...(type === 'response.completed' ? { status: 'completed' } : {}),
        output: visible,
        usage: responsesUsageOf(response.usage, total)
      }
    })
  }

  /** A message saying the search could not be completed, as the next item the client reads. */
  note(text: string): { events: string; item: Item } {
    const index = this.clientItems
    const item: Item = {
      type: 'message',
      id: `msg_gateway_${index}`,
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text, annotations: [] }]
    }
    this.shown++
    return {
      events:
        this.out({ type: 'response.output_item.added', output_index: index, item }) +
        this.out({ type: 'response.output_item.done', output_index: index, item }),
      item
    }
  }
}
