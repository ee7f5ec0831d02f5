/**
 * An answer relayed where the gateway offered the model its recall tool (the Messages API, Chat Completions,
 * the Responses API, Gemini's API): a stream goes on as it comes (only a recall call and the closing events wait); a recall call
 * is answered by the gateway and the turn continued upstream, into the same answer; what the upstream saw in
 * place of the client's answer is kept for the conversation's next request. One driver; each API's format
 * (proxy/recall-tool.ts, recall-chat.ts, recall-responses.ts, recall-gemini.ts) says how its rounds are read and written.
 */
import type { OutgoingHttpHeaders } from 'node:http'
import type { Readable, Transform } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { type Block, type Message, PROXY_RECALL_TOOL } from '../../compaction/index.js'
import { EventCuts } from '../../proxy/events.js'
import {
  RECALL_ROUNDS,
  type RecallCall,
  StreamRound,
  type Usage,
  addUsage,
  callsClientTools,
  closingEvents,
  emptyUsage,
  eventText,
  parseEvents,
  recallCalls,
  recallResult,
  spentResult,
  visibleBlocks,
  visibleFingerprint
} from '../../proxy/recall-tool.js'
import { ChatRound, chatClosing, chatFingerprint, chatRecallCalls, chatResult, chatVisible, parseChunks } from '../../proxy/recall-chat.js'
import { chatUsage, geminiUsage, responsesUsage } from '../../proxy/usage.js'
import {
  type ResponsesCursor,
  ResponsesRound,
  parseResponsesEvents,
  responsesCallsClient,
  responsesFingerprint,
  responsesRecallCalls,
  responsesResult,
  responsesUsageOf,
  responsesVisible
} from '../../proxy/recall-responses.js'
import {
  GeminiRound,
  geminiCallsClient,
  geminiFingerprint,
  geminiRecallCalls,
  geminiResult,
  geminiUsageOf,
  geminiVisible,
  parseGeminiChunks
} from '../../proxy/recall-gemini.js'
import type { UpstreamResponse } from '../../proxy/upstream.js'
import { errorBody } from '../errors.js'

/** How often a keep-alive goes while the gateway searches and the continuation has not begun. */
const KEEPALIVE_MS = 5_000
/** What the client reads where the search could not be completed and nothing else was said. */
const NOT_COMPLETED = '(The search of earlier turns could not be completed.)'

/** What the upstream saw in place of the client's answer, without its place (the service knows it). */
export interface KeptExchange {
  visible: string
  rounds: unknown[]
  pending: unknown[]
}

/** What the relay of a turn with the recall tool needs of the service and the upstream. */
export interface RecallTurn {
  /** One call answered: the session's best passages as the tool result's text. */
  search(call: RecallCall): Promise<string>
  /** The turn continued upstream: the request as forwarded, with these messages after its own. */
  send(added: readonly unknown[]): Promise<UpstreamResponse>
  /** What the upstream saw in place of the client's answer, for the next request. */
  keep(exchange: KeptExchange): void
  /** Each round's usage (each round is billed). */
  onUsage?: (usage: Usage) => void
  /** What the gateway performed of the API's context management, written into the client's answer as the API gives it. */
  rewrite?: (stream: boolean) => Transform
  aborted(): boolean
}

/** One round of a stream, in one API's format. */
interface Round {
  /** The client's text for a run of the upstream's whole events. */
  take(text: string): string
  /** The stream said it was done; or it said it failed. */
  readonly complete: boolean
  readonly failed: boolean
  /** The round's assistant item as the upstream gave it (every call, the recall's too). */
  message(): unknown
  usage(): Usage
  /** Where the next round's client-side numbering starts (the API's own state of it, where it has more). */
  readonly next: unknown
  /** The turn's close from this round: its usage summed, every round's visible parts, its reason where the turn ends otherwise. */
  closing(total: Usage, visible: readonly unknown[], reason?: 'ended'): string
  /** What the client is told where the turn ended early and it has had nothing to read: its events, and the part they add. */
  note(): { text: string; part: unknown }
}

/** How one API's answers are read and its continuations written. */
interface Format {
  /** A round after `previous` (none: the turn's first), `textBefore` where the client has had text. */
  round(previous: Round | undefined, textBefore: boolean): Round
  calls(message: unknown): RecallCall[]
  callsClient(message: unknown): boolean
  /** The parts of a message the client sees. */
  visible(message: unknown): unknown[]
  result(call: RecallCall, text: string, round: number): unknown
  spent(call: RecallCall): unknown
  /** The items a round's results are, after its assistant item. */
  answered(results: unknown[]): unknown[]
  fingerprint(visible: unknown[]): string
  /** What keeps a stream alive while the gateway searches, where the API's clients take one. */
  keepAlive: string
  /** The part a JSON answer holds where the turn ended early with nothing said. */
  notCompleted: unknown
  /** Whether a visible part says something to the client (a thought or a reasoning item does not). */
  says(part: unknown): boolean
  /** A JSON answer: its message, to read and to give back. */
  json: {
    message(body: Record<string, unknown>): unknown
    usage(body: Record<string, unknown>): Usage
    /** The client's answer: the last round's body with every round's visible parts and the usage summed. */
    answer(last: Record<string, unknown>, visible: unknown[], total: Usage, ended: boolean, clientCalls: boolean): Record<string, unknown>
  }
}

/** The Messages API's rounds: content blocks, a user message of tool results, events. */
const MESSAGES: Format = {
  round: (previous) => {
    const r = new StreamRound(previous === undefined, (previous?.next as number | undefined) ?? 0)
    return {
      take: (text) =>
        parseEvents(text)
          .flatMap(({ event, raw }) => r.take(event, raw))
          .join(''),
      get complete() {
        return r.stopped
      },
      get failed() {
        return r.failed
      },
      message: () => ({ role: 'assistant', content: r.content() }),
      usage: () => r.usage(),
      get next() {
        return r.clientBlocks
      },
      closing: (total, _visible, reason) => closingEvents(r.closing, total, reason ? 'end_turn' : undefined),
      note: () => {
        const index = r.clientBlocks
        return {
          text:
            eventText({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } } }) +
            eventText({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: NOT_COMPLETED } } }) +
            eventText({ event: 'content_block_stop', data: { type: 'content_block_stop', index } }),
          part: { type: 'text', text: NOT_COMPLETED }
        }
      }
    }
  },
  calls: (m) => recallCalls((m as Message).content as Block[]),
  callsClient: (m) => callsClientTools((m as Message).content as Block[]),
  visible: (m) => visibleBlocks((m as Message).content as Block[]),
  result: (call, text, round) => recallResult(call, text, round),
  spent: (call) => spentResult(call),
  answered: (results) => [{ role: 'user', content: results }],
  fingerprint: (visible) => visibleFingerprint(visible),
  keepAlive: eventText({ event: 'ping', data: { type: 'ping' } }),
  notCompleted: { type: 'text', text: NOT_COMPLETED },
  says: (part) => !['thinking', 'redacted_thinking'].includes(String((part as { type?: unknown }).type)),
  json: {
    message: (body) => (Array.isArray(body.content) ? { role: 'assistant', content: body.content } : undefined),
    usage: (body) => addUsage(emptyUsage(), body.usage as object | undefined),
    answer: (last, visible, total, ended, clientCalls) => ({
      ...last,
      content: visible.length > 0 ? visible : [{ type: 'text', text: NOT_COMPLETED }],
      stop_reason: ended && !clientCalls ? 'end_turn' : last.stop_reason,
      usage: { ...(last.usage as object), ...total }
    })
  }
}

/** The parts a Chat Completions answer shows the client: its text, then its calls. */
function chatParts(m: Record<string, unknown>): unknown[] {
  const visible = chatVisible(m)
  return [...(typeof visible.content === 'string' && visible.content !== '' ? [{ text: visible.content }] : []), ...((visible.tool_calls as unknown[]) ?? [])]
}

/** The message the client holds for parts of several rounds: their texts joined by a blank line, the calls after. */
function chatMessage(parts: unknown[]): Record<string, unknown> {
  const texts = parts.filter((p): p is { text: string } => typeof (p as { text?: unknown }).text === 'string').map((p) => p.text)
  const calls = parts.filter((p) => (p as { function?: unknown }).function !== undefined)
  return { role: 'assistant', content: texts.length > 0 ? texts.join('\n\n') : null, ...(calls.length > 0 ? { tool_calls: calls } : {}) }
}

/** Chat Completions' rounds: an assistant message with tool calls, tool messages, chunks. */
const CHAT: Format = {
  round: (previous, textBefore) => {
    const r = new ChatRound((previous?.next as number | undefined) ?? 0, textBefore)
    return {
      take: (text) =>
        parseChunks(text)
          .flatMap((chunk) => r.take(chunk))
          .join(''),
      get complete() {
        return r.done || r.finish !== undefined
      },
      get failed() {
        return r.failed
      },
      message: () => r.message(),
      usage: () => r.usage(),
      get next() {
        return r.clientCalls
      },
      closing: (total, _visible, reason) =>
        chatClosing(
          r.finish,
          r.usageChunk,
          {
            prompt: total.input_tokens + total.cache_read_input_tokens,
            completion: total.output_tokens,
            cached: total.cache_read_input_tokens
          },
          reason ? 'stop' : undefined
        ),
      note: () => ({
        text: `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: NOT_COMPLETED }, finish_reason: null }] })}\n\n`,
        part: { text: NOT_COMPLETED }
      })
    }
  },
  calls: (m) => chatRecallCalls(m as Record<string, unknown>),
  callsClient: (m) => ((chatVisible(m as Record<string, unknown>).tool_calls as unknown[] | undefined) ?? []).length > 0,
  visible: (m) => chatParts(m as Record<string, unknown>),
  result: (call, text, round) => chatResult(call.id, String(recallResult(call, text, round).content)),
  spent: (call) => chatResult(call.id, String(spentResult(call).content)),
  answered: (results) => results,
  fingerprint: (visible) => chatFingerprint(chatMessage(visible)),
  keepAlive: ': keep-alive\n\n',
  notCompleted: { text: NOT_COMPLETED },
  says: () => true,
  json: {
    message: (body) => ((body.choices as { message?: unknown }[] | undefined)?.[0]?.message as unknown) ?? undefined,
    usage: (body) => chatUsage(body.usage),
    answer: (last, visible, total, ended, clientCalls) => {
      const choice = ((last.choices as Record<string, unknown>[] | undefined)?.[0] ?? {}) as Record<string, unknown>
      const message = visible.length > 0 ? chatMessage(visible) : { role: 'assistant', content: NOT_COMPLETED }
      return {
        ...last,
        choices: [{ ...choice, message: { ...(choice.message as object), ...message }, finish_reason: ended && !clientCalls ? 'stop' : choice.finish_reason }],
        usage: {
          ...(last.usage as object),
          prompt_tokens: total.input_tokens + total.cache_read_input_tokens,
          completion_tokens: total.output_tokens,
          total_tokens: total.input_tokens + total.cache_read_input_tokens + total.output_tokens
        }
      }
    }
  }
}

/** The Responses API's rounds: a list of output items, function_call_output items, numbered events. */
const RESPONSES: Format = {
  round: (previous) => {
    const cursor = (previous?.next as ResponsesCursor | undefined) ?? { items: 0, sequence: 0, response: undefined }
    const r = new ResponsesRound(previous === undefined, cursor)
    return {
      take: (text) =>
        parseResponsesEvents(text)
          .flatMap((event) => r.take(event))
          .join(''),
      get complete() {
        return r.end !== undefined
      },
      get failed() {
        return r.failed
      },
      message: () => r.items(),
      usage: () => r.usage(),
      get next() {
        return { ...cursor, items: r.clientItems }
      },
      closing: (total, visible, reason) => r.closing(total, visible, reason),
      note: () => {
        const { events, item } = r.note(NOT_COMPLETED)
        return { text: events, part: item }
      }
    }
  },
  calls: (m) => responsesRecallCalls(m as Record<string, unknown>[]),
  callsClient: (m) => responsesCallsClient(m as Record<string, unknown>[]),
  visible: (m) => responsesVisible(m as Record<string, unknown>[]),
  result: (call, text, round) => responsesResult(call.id, String(recallResult(call, text, round).content)),
  spent: (call) => responsesResult(call.id, String(spentResult(call).content)),
  answered: (results) => results,
  fingerprint: (visible) => responsesFingerprint(visible),
  keepAlive: ': keep-alive\n\n',
  notCompleted: {
    type: 'message',
    id: 'msg_gateway_note',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text: NOT_COMPLETED, annotations: [] }]
  },
  says: (part) => (part as { type?: unknown }).type !== 'reasoning',
  json: {
    message: (body) => (Array.isArray(body.output) ? body.output : undefined),
    usage: (body) => responsesUsage(body.usage),
    answer: (last, visible, total) => ({ ...last, output: visible, usage: responsesUsageOf(last.usage, total) })
  }
}

/** Gemini's rounds: a model content, a user content of function responses, chunks. */
const GEMINI: Format = {
  round: () => {
    const r = new GeminiRound()
    return {
      take: (text) =>
        parseGeminiChunks(text)
          .flatMap((chunk) => r.take(chunk))
          .join(''),
      get complete() {
        return r.complete
      },
      get failed() {
        return r.failed
      },
      message: () => r.message(),
      usage: () => r.usage(),
      next: undefined,
      closing: (total, _visible, reason) => r.closing(total, reason),
      note: () => ({ text: r.note(NOT_COMPLETED), part: { text: NOT_COMPLETED } })
    }
  },
  calls: (m) => geminiRecallCalls(m as Record<string, unknown>),
  callsClient: (m) => geminiCallsClient(m as Record<string, unknown>),
  visible: (m) => geminiVisible(m as Record<string, unknown>),
  result: (call, text, round) => geminiResult(call, String(recallResult(call, text, round).content)),
  spent: (call) => geminiResult(call, String(spentResult(call).content)),
  answered: (results) => [{ role: 'user', parts: results }],
  fingerprint: (visible) => geminiFingerprint({ role: 'model', parts: visible }),
  // (Google's SDK reads a stream's chunks from its first byte on: a comment would stop it)
  keepAlive: '',
  notCompleted: { text: NOT_COMPLETED },
  says: (part) => (part as { thought?: unknown }).thought !== true,
  json: {
    message: (body) => {
      const content = (body.candidates as { content?: unknown }[] | undefined)?.[0]?.content as Record<string, unknown> | undefined
      return content && Array.isArray(content.parts) ? content : undefined
    },
    usage: (body) => geminiUsage(body.usageMetadata),
    answer: (last, visible, total, ended, clientCalls) => {
      const candidate = ((last.candidates as Record<string, unknown>[] | undefined)?.[0] ?? {}) as Record<string, unknown>
      return {
        ...last,
        candidates: [
          { ...candidate, content: { ...(candidate.content as object), parts: visible }, finishReason: ended && !clientCalls ? 'STOP' : candidate.finishReason }
        ],
        usageMetadata: geminiUsageOf(last.usageMetadata, total)
      }
    }
  }
}

export const RECALL_FORMATS = { messages: MESSAGES, chat: CHAT, responses: RESPONSES, gemini: GEMINI } as const
export type RecallFormat = keyof typeof RECALL_FORMATS

/** The results of a round's recall calls: searched in the first RECALL_ROUNDS rounds, the budget said spent after. */
async function answer(format: Format, turn: RecallTurn, calls: readonly RecallCall[], round: number): Promise<unknown[]> {
  if (round > RECALL_ROUNDS) return calls.map((c) => format.spent(c))
  return Promise.all(
    calls.map(async (c) => {
      try {
        return format.result(c, await turn.search(c), round)
      } catch {
        return format.result(c, `The ${PROXY_RECALL_TOOL} search could not be done just now.`, round)
      }
    })
  )
}

/** The kept exchange of a turn that took more than one round, or left results pending. */
function exchangeOf(format: Format, rounds: unknown[], visible: unknown[], pending: unknown[]): KeptExchange | undefined {
  if (rounds.length <= 1 && pending.length === 0) return undefined
  return { visible: format.fingerprint(visible), rounds, pending }
}

/** The events of one upstream stream, passed through `take` a run of whole events at a time and written as they come; resolves at its end. */
function pump(body: Readable, take: (text: string) => string, write: (text: string) => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const cuts = new EventCuts()
    const run = (bytes: Buffer | undefined): boolean => {
      if (!bytes || bytes.length === 0) return true
      const out = take(bytes.toString('utf8'))
      return out === '' || write(out)
    }
    body.on('data', (chunk: Buffer) => {
      if (!run(cuts.take(chunk))) body.pause()
    })
    body.once('end', () => {
      run(cuts.rest())
      resolve()
    })
    body.once('error', reject)
  })
}

/**
 * The client's answer, one stream as the API gives it (its head written now, the reply hijacked), through the
 * context management's rewrite where there is one; `resume` lets the upstream's current body flow again once
 * the client has drained what it was sent.
 */
function clientStream(reply: FastifyReply, rewrite: Transform | undefined, resume: () => void): { write(text: string): boolean; end(text: string): void } {
  const raw = reply.raw
  reply.removeHeader('content-length')
  reply.stamp()
  reply.watchClient()
  raw.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders)
  reply.hijack()
  if (rewrite) {
    rewrite.on('data', (chunk: Buffer) => {
      if (!raw.destroyed && !raw.write(chunk)) rewrite.pause()
    })
    rewrite.once('end', () => {
      if (!raw.destroyed) raw.end()
    })
    raw.on('drain', () => rewrite.resume())
    rewrite.on('drain', resume)
  } else raw.on('drain', resume)
  return {
    write: (text) => (raw.destroyed ? true : rewrite ? rewrite.write(text) : raw.write(text)),
    end: (text) => {
      if (rewrite) rewrite.end(text)
      else if (!raw.destroyed) raw.end(text)
    }
  }
}

/** A stream's turn: rounds until the model answers without a recall call, the client's tools are called, or the budget ends it. */
export async function relayRecallStream(reply: FastifyReply, res: UpstreamResponse, turn: RecallTurn, api: string, kind: RecallFormat): Promise<void> {
  const format = RECALL_FORMATS[kind]
  let body = res.body
  const { write, end } = clientStream(reply, turn.rewrite?.(true), () => body.resume())
  let usage = emptyUsage()
  let previous: Round | undefined
  const rounds: unknown[] = []
  const visible: unknown[] = []
  const finish = (text: string, pending: unknown[] = []): void => {
    end(text)
    const exchange = exchangeOf(format, rounds, visible, pending)
    if (exchange) turn.keep(exchange)
  }
  for (let round = 1; ; round++) {
    const r = format.round(previous, visible.length > 0)
    try {
      await pump(body, (text) => r.take(text), write)
    } catch (err) {
      if (!turn.aborted() && !reply.raw.destroyed && kind === 'messages')
        write(eventText({ event: 'error', data: errorBody('api_error', `${api} stream broke off: ${(err as Error).message}`) }))
      return finish('')
    }
    const roundUsage = r.usage()
    usage = addUsage(usage, roundUsage)
    turn.onUsage?.(roundUsage)
    if (r.failed || !r.complete) return finish('')
    const message = r.message()
    rounds.push(message)
    visible.push(...format.visible(message))
    const calls = format.calls(message)
    if (calls.length === 0) return finish(r.closing(usage, visible))
    // a keep-alive while the gateway searches and the continuation has not begun to answer
    write(format.keepAlive)
    const alive = setInterval(() => write(format.keepAlive), KEEPALIVE_MS)
    try {
      const results = await answer(format, turn, calls, round)
      // the client's own calls go to the client; the recall's results wait for its next request
      if (format.callsClient(message)) return finish(r.closing(usage, visible), results)
      if (round > RECALL_ROUNDS + 1 || turn.aborted()) return finish(r.closing(usage, visible, 'ended'), results)
      const next = await turn.send([...rounds, ...format.answered(results)]).catch(() => undefined)
      if (!next || next.status !== 200) {
        next?.body.resume()
        const note = visible.some(format.says) ? undefined : r.note()
        if (note) visible.push(note.part)
        return finish((note?.text ?? '') + r.closing(usage, visible, 'ended'), results)
      }
      rounds.push(...format.answered(results))
      previous = r
      body = next.body
    } finally {
      clearInterval(alive)
    }
  }
}

/** A JSON answer's turn: the same rounds, the client given one answer (the last round's, with every round's visible parts and usage). */
export async function relayRecallJson(reply: FastifyReply, res: UpstreamResponse, turn: RecallTurn, kind: RecallFormat): Promise<FastifyReply> {
  const format = RECALL_FORMATS[kind]
  reply.removeHeader('content-length')
  let current = res
  let usage = emptyUsage()
  const rounds: unknown[] = []
  const visible: unknown[] = []
  let last: Record<string, unknown> | undefined
  let pending: unknown[] = []
  let ended = false
  let clientCalls = false
  for (let round = 1; ; round++) {
    const bytes = await readAll(current.body)
    let body: Record<string, unknown>
    try {
      body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>
    } catch {
      body = {}
    }
    const message = format.json.message(body)
    if (message === undefined) {
      // not an answer the gateway can read: the first as it came, a later one ends the turn with what the client has
      if (round === 1) return reply.send(bytes)
      ended = true
      break
    }
    const roundUsage = format.json.usage(body)
    usage = addUsage(usage, roundUsage)
    turn.onUsage?.(roundUsage)
    last = body
    rounds.push(message)
    visible.push(...format.visible(message))
    const calls = format.calls(message)
    if (calls.length === 0) break
    const results = await answer(format, turn, calls, round)
    clientCalls = format.callsClient(message)
    if (clientCalls || round > RECALL_ROUNDS + 1 || turn.aborted()) {
      pending = results
      ended = !clientCalls
      break
    }
    const next = await turn.send([...rounds, ...format.answered(results)]).catch(() => undefined)
    if (!next || next.status !== 200) {
      next?.body.resume()
      pending = results
      ended = true
      break
    }
    rounds.push(...format.answered(results))
    current = next
  }
  if (!visible.some(format.says)) visible.push(format.notCompleted)
  const exchange = exchangeOf(format, rounds, visible, pending)
  if (exchange) turn.keep(exchange)
  return sendAnswer(reply, turn, Buffer.from(JSON.stringify(format.json.answer(last ?? {}, visible, usage, ended, clientCalls))))
}

/** A JSON answer sent, through the context management's rewrite where there is one. */
async function sendAnswer(reply: FastifyReply, turn: RecallTurn, whole: Buffer): Promise<FastifyReply> {
  const rewrite = turn.rewrite?.(false)
  if (!rewrite) return reply.type('application/json').send(whole)
  const rewritten = readAll(rewrite)
  rewrite.end(whole)
  return reply.type('application/json').send(await rewritten)
}

function readAll(body: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    body.on('data', (c: Buffer) => chunks.push(c))
    body.once('end', () => resolve(Buffer.concat(chunks)))
    body.once('error', reject)
  })
}
