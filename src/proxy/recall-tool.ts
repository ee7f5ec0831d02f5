/**
 * The proxy's recall tool on the Messages API: offered to the model once the gateway has rewritten a
 * conversation, its calls found in the answer as it comes and answered by the gateway, the turn continued
 * upstream, and the client given one answer without a trace of it. Pure: the relay (server/proxy/forward.ts)
 * feeds it events and does the I/O.
 *
 * - A stream is read event by event: what comes before and beside a recall call (text, thinking, the
 *   client's own tool calls) goes on at once, renumbered; only the recall block and the closing events wait.
 * - What the upstream saw in place of the client's answer (its rounds, exactly as they came) is an exchange,
 *   put back on the conversation's next request where the client's answer stands, so that the upstream sees
 *   its own prefix again byte for byte (thinking signatures and the prompt cache hold).
 */
import { createHash } from 'node:crypto'
import { type Block, type Message, PROXY_RECALL_TOOL, type ToolResultBlock, blocksOf } from '../compaction/index.js'
import { topLevelField } from './events.js'

/** Recall rounds answered in one turn; a call past them is told the budget is spent. */
export const RECALL_ROUNDS = 3

/** The recall tool as the Messages API takes it: the same bytes on every request it is offered in. */
export const RECALL_TOOL_DEFINITION = {
  name: PROXY_RECALL_TOOL,
  description:
    "Search what was removed from this conversation to save context (older turns compacted into the summary, tool outputs cleared): requests, answers, whole tool outputs (a log's lines, a file's contents), commands and their outcomes, errors. Use it when you need the exact text of something no longer in the conversation. Returns the best matching passages, exact, each with the messages and lines it came from.",
  input_schema: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'A few distinctive words of what to find: an error message, a file name, a value, a tool call id.' },
      limit: { type: 'integer', minimum: 1, maximum: 20, description: 'How many passages (default 5).' }
    },
    required: ['query']
  }
} as const

/** The same tool as Chat Completions takes one (a function). */
export const CHAT_RECALL_TOOL_DEFINITION = {
  type: 'function',
  function: { name: RECALL_TOOL_DEFINITION.name, description: RECALL_TOOL_DEFINITION.description, parameters: RECALL_TOOL_DEFINITION.input_schema }
} as const

/**
 * A request body's bytes with `tool` after the client's own tools, every other byte as it was (the caller
 * offers it only where the client has no tool of that name).
 */
export function withRecallToolBytes(bytes: Buffer, tool: object = RECALL_TOOL_DEFINITION): Buffer {
  const json = JSON.stringify(tool)
  const tools = topLevelField(bytes, 'tools')
  if (tools && tools.value[0] === 0x5b) {
    const start = tools.value.byteOffset - bytes.byteOffset
    const close = start + tools.value.lastIndexOf(0x5d)
    const empty =
      tools.value
        .subarray(1, tools.value.length - 1)
        .toString('utf8')
        .trim() === ''
    return Buffer.concat([bytes.subarray(0, close), Buffer.from(`${empty ? '' : ','}${json}`), bytes.subarray(close)])
  }
  const base = tools ? tools.without : bytes
  const close = base.lastIndexOf(0x7d)
  const empty =
    base
      .subarray(base.indexOf(0x7b) + 1, close)
      .toString('utf8')
      .trim() === ''
  return Buffer.concat([base.subarray(0, close), Buffer.from(`${empty ? '' : ','}"tools":[${json}]`), base.subarray(close)])
}

/** The APIs whose rounds the proxy answers the recall tool in (server/proxy/recall-relay.ts has a format each). */
export type RecallFormat = 'messages' | 'chat' | 'responses' | 'gemini'

/** One call of the recall tool in an answer. */
export interface RecallCall {
  id: string
  query: string
  limit: unknown
}

const isRecall = (b: unknown): b is { type: 'tool_use'; id: string; name: string; input: unknown } =>
  typeof b === 'object' && b !== null && (b as Block).type === 'tool_use' && (b as { name?: unknown }).name === PROXY_RECALL_TOOL

/** The recall calls of an answer's content. */
export function recallCalls(content: readonly unknown[]): RecallCall[] {
  return content.filter(isRecall).map((b) => {
    const input = (b.input ?? {}) as { query?: unknown; limit?: unknown }
    return { id: b.id, query: typeof input.query === 'string' ? input.query : '', limit: input.limit }
  })
}

/** The blocks of an answer the client sees: all but the recall calls. */
export function visibleBlocks(content: readonly unknown[]): unknown[] {
  return content.filter((b) => !isRecall(b))
}

/** Whether the answer calls one of the client's own tools. */
export function callsClientTools(content: readonly unknown[]): boolean {
  return visibleBlocks(content).some((b) => (b as Block | null)?.type === 'tool_use')
}

/** A recall result as the model reads it, the last round's saying the budget is spent. */
export function recallResult(call: RecallCall, text: string, round: number): ToolResultBlock {
  const last = round >= RECALL_ROUNDS ? `\n\n(That was the last ${PROXY_RECALL_TOOL} this turn: answer with what you have.)` : ''
  return { type: 'tool_result', tool_use_id: call.id, content: `${text}${last}` }
}

/** What a call past the turn's budget is answered with. */
export function spentResult(call: RecallCall): ToolResultBlock {
  return {
    type: 'tool_result',
    tool_use_id: call.id,
    content: `The budget of ${RECALL_ROUNDS} ${PROXY_RECALL_TOOL} calls for this turn is spent: answer with what you have.`
  }
}

/** What the upstream saw in place of one answer the client got. */
export interface RecallExchange {
  /** Where the client's answer stands in its history (its index: a client's history only grows). */
  at: number
  /** The client's answer, as visibleFingerprint reads it (two answers of the same text stand at different places). */
  visible: string
  /** The rounds as the upstream saw them: assistant, user (the recall results), assistant… */
  rounds: Message[]
  /** Results the client's next message must open with: the last round's recall calls, answered (a recall beside the client's own calls, or a turn ended early). */
  pending: Block[]
}

/** What identifies an answer the client sends back: each block's kind and content (a client may add cache marks or reorder keys). */
export function visibleFingerprint(content: readonly unknown[]): string {
  const parts = content.map((raw) => {
    const b = (raw ?? {}) as Record<string, unknown>
    switch (b.type) {
      case 'text':
        return ['text', b.text]
      case 'thinking':
        return ['thinking', b.signature ?? b.thinking]
      case 'redacted_thinking':
        return ['redacted_thinking', b.data]
      case 'tool_use':
      case 'server_tool_use':
        return [b.type, b.id, b.name]
      default:
        return [b.type, b.id ?? b.tool_use_id ?? null]
    }
  })
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 32)
}

/**
 * The client's messages with every answer an exchange stands for put back as the upstream saw it: its
 * rounds where the answer stood, and its pending results opening the message after it.
 */
export function restoreExchanges(messages: readonly Message[], exchanges: readonly RecallExchange[]): { messages: Message[]; restored: number } {
  if (exchanges.length === 0) return { messages: [...messages], restored: 0 }
  const byPlace = new Map(exchanges.map((e) => [`${e.at}\u0000${e.visible}`, e]))
  const out: Message[] = []
  let restored = 0
  let pending: Block[] = []
  for (const [i, m] of messages.entries()) {
    if (pending.length > 0 && m.role === 'user') {
      out.push({ ...m, content: [...pending, ...blocksOf(m)] })
      pending = []
      continue
    }
    pending = []
    const exchange = m.role === 'assistant' ? byPlace.get(`${i}\u0000${visibleFingerprint(blocksOf(m))}`) : undefined
    if (!exchange) {
      out.push(m)
      continue
    }
    out.push(...exchange.rounds.map((r) => structuredClone(r)))
    pending = exchange.pending.map((b) => structuredClone(b))
    restored++
  }
  return { messages: out, restored }
}

/** One server-sent event: its name and its data, parsed. */
export interface StreamEvent {
  event: string
  data: Record<string, unknown>
}

/** The events of a run of whole events' text (a comment or an unreadable event is left out). */
export function parseEvents(text: string): { event: StreamEvent | undefined; raw: string }[] {
  return text
    .split(/(?<=\r?\n\r?\n)/)
    .filter((raw) => raw.trim() !== '')
    .map((raw) => {
      let name = 'message'
      const data: string[] = []
      for (const line of raw.split(/\r?\n/)) {
        if (line.startsWith('event:')) name = line.slice(6).trim()
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
      }
      try {
        return { event: { event: name, data: JSON.parse(data.join('\n')) as Record<string, unknown> }, raw }
      } catch {
        return { event: undefined, raw }
      }
    })
}

/** An event as the Messages API writes it. */
export function eventText(event: StreamEvent): string {
  return `event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`
}

/** An answer's usage, summed over rounds. */
export interface Usage {
  input_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  output_tokens: number
}

const USAGE_FIELDS = ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'output_tokens'] as const

export function emptyUsage(): Usage {
  return { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 }
}

/** `into` with `from`'s counts added. */
export function addUsage(into: Usage, from: object | undefined): Usage {
  const out = { ...into }
  for (const f of USAGE_FIELDS) {
    const v = (from as Record<string, unknown> | undefined)?.[f]
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) out[f] += v
  }
  return out
}

/**
 * One round of a streamed answer: the upstream's events in, the client's out. The first round's
 * `message_start` goes on; a later round's is dropped (the client's answer goes on). Blocks are renumbered
 * from `offset` (the blocks the client has had), recall calls left out; the round's closing events are held.
 */
export class StreamRound {
  /** The round's blocks, whole, by the upstream's index: what the upstream is sent back in the continuation. */
  readonly blocks: Record<string, unknown>[] = []
  private readonly hidden = new Set<number>()
  private readonly clientIndex = new Map<number, number>()
  private readonly json = new Map<number, string>()
  private shown = 0
  /** The round's usage (message_start's, then message_delta's counts, which are cumulative). */
  private startUsage: Record<string, unknown> | undefined
  private deltaUsage: Record<string, unknown> | undefined
  /** The closing message_delta, held. */
  closing: Record<string, unknown> | undefined
  /** The stream said it failed (an `error` event), or ended. */
  failed = false
  stopped = false

  constructor(
    private readonly first: boolean,
    private readonly offset: number
  ) {}

  /** Blocks the client has had, this round's included. */
  get clientBlocks(): number {
    return this.offset + this.shown
  }

  /** The events to send the client for one of the upstream's (raw: its bytes as they came). */
  take(event: StreamEvent | undefined, raw: string): string[] {
    if (!event) return [raw]
    const d = event.data
    switch (d.type) {
      case 'message_start':
        this.startUsage = ((d.message ?? {}) as { usage?: Record<string, unknown> }).usage
        return this.first ? [raw] : []
      case 'content_block_start': {
        const index = Number(d.index)
        const block = structuredClone((d.content_block ?? {}) as Record<string, unknown>)
        this.blocks[index] = block
        if (isRecall(block)) {
          this.hidden.add(index)
          return []
        }
        return [this.renumbered(event, raw, index, true)]
      }
      case 'content_block_delta': {
        const index = Number(d.index)
        this.apply(index, (d.delta ?? {}) as Record<string, unknown>)
        return this.hidden.has(index) ? [] : [this.renumbered(event, raw, index)]
      }
      case 'content_block_stop': {
        const index = Number(d.index)
        const partial = this.json.get(index)
        const block = this.blocks[index]
        if (block && partial !== undefined) {
          try {
            block.input = partial.trim() === '' ? {} : JSON.parse(partial)
          } catch {
            block.input = {}
          }
        }
        return this.hidden.has(index) ? [] : [this.renumbered(event, raw, index)]
      }
      case 'message_delta':
        this.closing = d
        this.deltaUsage = d.usage as Record<string, unknown> | undefined
        return []
      case 'message_stop':
        this.stopped = true
        return []
      case 'error':
        this.failed = true
        return [raw]
      default:
        return [raw]
    }
  }

  /** The round's content, whole, in the upstream's order. */
  content(): Record<string, unknown>[] {
    return this.blocks.filter((b) => b !== undefined)
  }

  /** The round's stop reason, from its held closing. */
  stopReason(): unknown {
    return (this.closing?.delta as { stop_reason?: unknown } | undefined)?.stop_reason
  }

  /** The round's usage: message_delta's counts where it gave them (cumulative), else message_start's. */
  usage(): Usage {
    const merged: Record<string, unknown> = { ...(this.startUsage ?? {}) }
    for (const [k, v] of Object.entries(this.deltaUsage ?? {})) if (typeof v === 'number') merged[k] = v
    return addUsage(emptyUsage(), merged)
  }

  private apply(index: number, delta: Record<string, unknown>): void {
    const block = this.blocks[index]
    if (!block) return
    switch (delta.type) {
      case 'text_delta':
        block.text = `${typeof block.text === 'string' ? block.text : ''}${String(delta.text ?? '')}`
        break
      case 'thinking_delta':
        block.thinking = `${typeof block.thinking === 'string' ? block.thinking : ''}${String(delta.thinking ?? '')}`
        break
      case 'signature_delta':
        block.signature = delta.signature
        break
      case 'input_json_delta':
        this.json.set(index, `${this.json.get(index) ?? ''}${String(delta.partial_json ?? '')}`)
        break
      case 'citations_delta':
        block.citations = [...(Array.isArray(block.citations) ? block.citations : []), delta.citation]
        break
    }
  }

  private renumbered(event: StreamEvent, raw: string, index: number, starts = false): string {
    let to = this.clientIndex.get(index)
    if (to === undefined) {
      to = this.offset + this.shown
      if (starts) this.shown++
      this.clientIndex.set(index, to)
    }
    return to === index ? raw : eventText({ event: event.event, data: { ...event.data, index: to } })
  }
}

/** The closing events of a turn: its last round's message_delta with the usage of every round, and message_stop. */
export function closingEvents(closing: Record<string, unknown> | undefined, usage: Usage, stopReason?: string): string {
  const delta = { ...((closing?.delta ?? {}) as Record<string, unknown>), ...(stopReason ? { stop_reason: stopReason, stop_sequence: null } : {}) }
  const usageOut = { ...((closing?.usage ?? {}) as Record<string, unknown>), ...usage }
  return (
    eventText({ event: 'message_delta', data: { ...(closing ?? {}), type: 'message_delta', delta, usage: usageOut } }) +
    eventText({ event: 'message_stop', data: { type: 'message_stop' } })
  )
}

/** An exchange as kept, whichever API's items it holds (recall-tool.ts's, recall-chat.ts's). */
export interface StoredExchange {
  at: number
  visible: string
  rounds: unknown[]
  pending: unknown[]
}
