/**
 * The proxy's recall tool on Chat Completions (recall-tool.ts is the Messages API's): the same rules in
 * that API's items. A function call of the tool is found in the chunks as they come: text and the client's
 * own calls go on at once (the calls renumbered), only the recall call and the closing chunks wait; what the
 * upstream saw in place of the client's answer (its assistant messages and the tool messages between them)
 * is put back on the next request where the client's answer stands. Pure: the relay does the I/O.
 */
import { chatUsage } from './usage.js'
import { createHash } from 'node:crypto'
import { PROXY_RECALL_TOOL } from '../compaction/index.js'
import type { RecallCall } from './recall-tool.js'
import { type Usage, addUsage, emptyUsage } from './recall-tool.js'

type Item = Record<string, unknown>

interface ChatCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

/** What the upstream saw in place of one answer the client got, in Chat Completions' items. */
export interface ChatExchange {
  at: number
  visible: string
  /** The assistant messages and tool messages as the upstream saw them. */
  rounds: Item[]
  /** Tool messages the client's next ones must be preceded by (the last round's recall calls, answered). */
  pending: Item[]
}

const callsOf = (m: Item): ChatCall[] => (Array.isArray(m.tool_calls) ? (m.tool_calls as ChatCall[]) : [])
const isRecall = (c: ChatCall): boolean => c.function?.name === PROXY_RECALL_TOOL

/** What identifies an assistant message the client sends back: its text and its calls' ids. */
export function chatFingerprint(m: Item): string {
  const text = typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? JSON.stringify(m.content) : ''
  return createHash('sha256')
    .update(JSON.stringify([text, callsOf(m).map((c) => c.id)]))
    .digest('base64url')
    .slice(0, 32)
}

/** The client's messages with every answer an exchange stands for put back as the upstream saw it. */
export function restoreChat(items: readonly Item[], exchanges: readonly ChatExchange[]): { items: Item[]; restored: number } {
  if (exchanges.length === 0) return { items: [...items], restored: 0 }
  const byPlace = new Map(exchanges.map((e) => [`${e.at}\u0000${e.visible}`, e]))
  const out: Item[] = []
  let restored = 0
  items.forEach((m, i) => {
    const exchange = m.role === 'assistant' ? byPlace.get(`${i}\u0000${chatFingerprint(m)}`) : undefined
    if (!exchange) return void out.push(m)
    out.push(...exchange.rounds.map((r) => structuredClone(r)), ...exchange.pending.map((p) => structuredClone(p)))
    restored++
  })
  return { items: out, restored }
}

/** The recall calls of an assistant message. */
export function chatRecallCalls(m: Item): RecallCall[] {
  return callsOf(m)
    .filter(isRecall)
    .map((c) => {
      let input: { query?: unknown; limit?: unknown } = {}
      try {
        input = JSON.parse(c.function.arguments || '{}') as typeof input
      } catch {
        // arguments that are not JSON: an empty query, answered as such
      }
      return { id: c.id, query: typeof input.query === 'string' ? input.query : '', limit: input.limit }
    })
}

/** The message as the client sees it: without the recall calls. */
export function chatVisible(m: Item): Item {
  const calls = callsOf(m).filter((c) => !isRecall(c))
  const { tool_calls: _all, ...rest } = m
  return calls.length > 0 ? { ...rest, tool_calls: calls } : rest
}

/** A result as the model reads it: a tool message. */
export function chatResult(callId: string, text: string): Item {
  return { role: 'tool', tool_call_id: callId, content: text }
}

/** One chunk of a Chat Completions stream, or its end. */
type Chunk = { kind: 'data'; data: Item; raw: string } | { kind: 'done'; raw: string } | { kind: 'other'; raw: string }

export function parseChunks(text: string): Chunk[] {
  return text
    .split(/(?<=\r?\n\r?\n)/)
    .filter((raw) => raw.trim() !== '')
    .map((raw): Chunk => {
      const data = raw
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n')
      if (data === '[DONE]') return { kind: 'done', raw }
      try {
        return { kind: 'data', data: JSON.parse(data) as Item, raw }
      } catch {
        return { kind: 'other', raw }
      }
    })
}

const chunkText = (data: Item): string => `data: ${JSON.stringify(data)}\n\n`

/**
 * One round of a streamed answer: the upstream's chunks in, the client's out. Content deltas go on as they
 * come (after a blank line where an earlier round said something); the client's calls go on renumbered from
 * `offset` (the calls the client has had); the recall calls, the chunk that finishes the round and the usage
 * chunk are held.
 */
export class ChatRound {
  private text = ''
  private readonly calls = new Map<number, ChatCall>()
  private readonly clientIndex = new Map<number, number>()
  private readonly hidden = new Set<number>()
  private shown = 0
  private separated: boolean
  /** The chunk that finished the round and the usage chunk, held. */
  finish: Item | undefined
  usageChunk: Item | undefined
  done = false
  failed = false

  constructor(
    private readonly offset: number,
    /** The client has had text already: this round's text begins after a blank line. */
    textBefore: boolean
  ) {
    this.separated = !textBefore
  }

  get clientCalls(): number {
    return this.offset + this.shown
  }

  take(chunk: Chunk): string[] {
    if (chunk.kind === 'done') {
      this.done = true
      return []
    }
    if (chunk.kind === 'other') return [chunk.raw]
    const data = chunk.data
    if (data.error !== undefined) {
      this.failed = true
      return [chunk.raw]
    }
    const choices = Array.isArray(data.choices) ? (data.choices as Item[]) : []
    if (choices.length === 0) {
      if (data.usage !== undefined) this.usageChunk = data
      return data.usage !== undefined ? [] : [chunk.raw]
    }
    const choice = choices[0] ?? {}
    const delta = (choice.delta ?? {}) as Item
    const out: Item = { ...delta }
    let changed = false
    if (typeof delta.content === 'string') {
      this.text += delta.content
      if (!this.separated && delta.content !== '') {
        out.content = `\n\n${delta.content}`
        this.separated = true
        changed = true
      }
    }
    if (Array.isArray(delta.tool_calls)) {
      changed = true
      const kept: Item[] = []
      for (const raw of delta.tool_calls as Item[]) {
        const index = Number(raw.index)
        const fn = (raw.function ?? {}) as { name?: string; arguments?: string }
        let call = this.calls.get(index)
        if (!call) {
          call = { id: String(raw.id ?? ''), type: 'function', function: { name: fn.name ?? '', arguments: '' } }
          this.calls.set(index, call)
          if (call.function.name === PROXY_RECALL_TOOL) this.hidden.add(index)
          else this.clientIndex.set(index, this.offset + this.shown++)
        }
        call.function.arguments += fn.arguments ?? ''
        if (!this.hidden.has(index)) kept.push({ ...raw, index: this.clientIndex.get(index) })
      }
      if (kept.length > 0) out.tool_calls = kept
      else delete out.tool_calls
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.finish = data
      const rest = Object.keys(out).filter((k) => k !== 'role')
      if (rest.length === 0) return []
      return [chunkText({ ...data, choices: [{ ...choice, delta: out, finish_reason: null }] })]
    }
    if (!changed) return [chunk.raw]
    if (Object.keys(out).length === 0) return []
    return [chunkText({ ...data, choices: [{ ...choice, delta: out }] })]
  }

  /** The round's assistant message as the upstream gave it: its text and every call, the recall's too. */
  message(): Item {
    const calls = [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c)
    return { role: 'assistant', content: this.text === '' ? null : this.text, ...(calls.length > 0 ? { tool_calls: calls } : {}) }
  }

  usage(): Usage {
    return addUsage(emptyUsage(), chatUsage(this.usageChunk?.usage))
  }
}

/** The turn's closing chunks: the last round's finishing chunk (its reason where the turn ends otherwise), its usage summed, `[DONE]`. */
export function chatClosing(
  finish: Item | undefined,
  usageChunk: Item | undefined,
  total: { prompt: number; completion: number; cached: number },
  reason?: string
): string {
  const choice = ((finish?.choices as Item[] | undefined)?.[0] ?? { index: 0 }) as Item
  const closing = chunkText({
    ...(finish ?? { object: 'chat.completion.chunk' }),
    choices: [{ ...choice, delta: {}, finish_reason: reason ?? choice.finish_reason ?? 'stop' }]
  })
  const usage = usageChunk
    ? chunkText({
        ...usageChunk,
        usage: {
          ...(usageChunk.usage as Item),
          prompt_tokens: total.prompt,
          completion_tokens: total.completion,
          total_tokens: total.prompt + total.completion,
          prompt_tokens_details: { ...((usageChunk.usage as Item | undefined)?.prompt_tokens_details as Item | undefined), cached_tokens: total.cached }
        }
      })
    : ''
  return `${closing}${usage}data: [DONE]\n\n`
}
