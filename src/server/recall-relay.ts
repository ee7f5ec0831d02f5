/**
 * The Messages API's answer relayed where the gateway offered the model its recall tool: a stream goes on
 * event by event as it comes (proxy/recall-tool.ts: only a recall block and the closing events wait); a
 * recall call is answered by the gateway and the turn continued upstream, into the same answer; what the
 * upstream saw in place of the client's answer is kept for the conversation's next request.
 */
import type { OutgoingHttpHeaders } from 'node:http'
import type { Readable, Transform } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { type Block, type Message, PROXY_RECALL_TOOL } from '../compaction/index.js'
import { EventCuts } from '../proxy/events.js'
import {
  RECALL_ROUNDS,
  type RecallCall,
  type RecallExchange,
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
} from '../proxy/recall-tool.js'
import type { UpstreamResponse } from '../proxy/upstream.js'
import { errorBody } from './errors.js'

/** How often a keep-alive event goes while the gateway searches and the continuation has not begun. */
const KEEPALIVE_MS = 5_000
const PING = eventText({ event: 'ping', data: { type: 'ping' } })

/** What the relay of a turn with the recall tool needs of the service and the upstream. */
export interface RecallTurn {
  /** One call answered: the session's best passages as the tool result's text. */
  search(call: RecallCall): Promise<string>
  /** The turn continued upstream: the request as forwarded, with these messages after its own. */
  send(added: readonly Message[]): Promise<UpstreamResponse>
  /** What the upstream saw in place of the client's answer, for the next request. */
  keep(exchange: Omit<RecallExchange, 'at'>): void
  /** Each round's usage (each round is billed). */
  onUsage?: (usage: Usage) => void
  /** What the gateway performed of the API's context management, written into the client's answer as the API gives it. */
  rewrite?: (stream: boolean) => Transform
  aborted(): boolean
}

/** The results of a round's recall calls: searched in the first RECALL_ROUNDS rounds, the budget said spent after. */
async function answer(turn: RecallTurn, calls: readonly RecallCall[], round: number): Promise<Block[]> {
  if (round > RECALL_ROUNDS) return calls.map(spentResult)
  return Promise.all(
    calls.map(async (c) => {
      try {
        return recallResult(c, await turn.search(c), round)
      } catch {
        return recallResult(c, `The ${PROXY_RECALL_TOOL} search could not be done just now.`, round)
      }
    })
  )
}

/** The kept exchange of a turn that took more than one round, or left results pending. */
function exchangeOf(rounds: Message[], visible: unknown[], pending: Block[]): Omit<RecallExchange, 'at'> | undefined {
  if (rounds.length <= 1 && pending.length === 0) return undefined
  return { visible: visibleFingerprint(visible), rounds, pending }
}

/** The events of one upstream stream, each passed through `round`, written as they come; resolves at its end. */
function pump(body: Readable, round: StreamRound, write: (text: string) => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const cuts = new EventCuts()
    const take = (bytes: Buffer | undefined): boolean => {
      if (!bytes || bytes.length === 0) return true
      const out = parseEvents(bytes.toString('utf8'))
        .flatMap(({ event, raw }) => round.take(event, raw))
        .join('')
      return out === '' || write(out)
    }
    body.on('data', (chunk: Buffer) => {
      if (!take(cuts.take(chunk))) body.pause()
    })
    body.once('end', () => {
      take(cuts.rest())
      resolve()
    })
    body.once('error', reject)
  })
}

/** A stream's turn: rounds until the model answers without a recall call, the client's tools are called, or the budget ends it. */
export async function relayRecallStream(reply: FastifyReply, res: UpstreamResponse, turn: RecallTurn, api: string): Promise<void> {
  const raw = reply.raw
  reply.removeHeader('content-length')
  reply.stamp()
  reply.watchClient()
  raw.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders)
  reply.hijack()
  let body = res.body
  // the client's answer, one stream as the API gives it, through the context management's rewrite where there is one
  const rewrite = turn.rewrite?.(true)
  if (rewrite) {
    rewrite.on('data', (chunk: Buffer) => {
      if (!raw.destroyed && !raw.write(chunk)) rewrite.pause()
    })
    rewrite.once('end', () => {
      if (!raw.destroyed) raw.end()
    })
    raw.on('drain', () => rewrite.resume())
    rewrite.on('drain', () => body.resume())
  } else raw.on('drain', () => body.resume())
  const write = (text: string): boolean => (raw.destroyed ? true : rewrite ? rewrite.write(text) : raw.write(text))
  const end = (text: string): void => {
    if (rewrite) rewrite.end(text)
    else if (!raw.destroyed) raw.end(text)
  }
  let usage = emptyUsage()
  let offset = 0
  const rounds: Message[] = []
  const visible: unknown[] = []
  const finish = (text: string, pending: Block[] = []): void => {
    end(text)
    const exchange = exchangeOf(rounds, visible, pending)
    if (exchange) turn.keep(exchange)
  }
  for (let round = 1; ; round++) {
    const r = new StreamRound(round === 1, offset)
    try {
      await pump(body, r, write)
    } catch (err) {
      if (!turn.aborted() && !raw.destroyed)
        write(eventText({ event: 'error', data: errorBody('api_error', `${api} stream broke off: ${(err as Error).message}`) }))
      finish('')
      return
    }
    const roundUsage = r.usage()
    usage = addUsage(usage, roundUsage)
    turn.onUsage?.(roundUsage)
    if (r.failed || !r.stopped) {
      finish('')
      return
    }
    const content = r.content()
    rounds.push({ role: 'assistant', content: content as Block[] })
    visible.push(...visibleBlocks(content))
    const calls = recallCalls(content)
    if (calls.length === 0) return finish(closingEvents(r.closing, usage))
    // a keep-alive while the gateway searches and the continuation has not begun to answer
    write(PING)
    const alive = setInterval(() => write(PING), KEEPALIVE_MS)
    try {
      const results = await answer(turn, calls, round)
      // the client's own calls go to the client; the recall's results wait for its next request
      if (callsClientTools(content)) return finish(closingEvents(r.closing, usage), results)
      if (round > RECALL_ROUNDS + 1 || turn.aborted()) return finish(closingEvents(r.closing, usage, 'end_turn'), results)
      const next = await turn.send(continuation(rounds, results)).catch(() => undefined)
      if (!next || next.status !== 200) {
        next?.body.resume()
        return finish(endedEarly(r, usage, offset, visible), results)
      }
      rounds.push({ role: 'user', content: results })
      offset = r.clientBlocks
      body = next.body
    } finally {
      clearInterval(alive)
    }
  }
}

/** The messages a continuation adds after the forwarded request's own: every round so far, and the last one's results. */
function continuation(rounds: readonly Message[], results: Block[]): Message[] {
  return [...rounds, { role: 'user', content: results }]
}

/** The close of a turn whose continuation failed: a normal answer (a line said where the client saw nothing), never an error. */
function endedEarly(round: StreamRound, usage: Usage, offset: number, visible: unknown[]): string {
  let text = ''
  if (visible.length === 0) {
    const note = { type: 'text', text: `(The search of earlier turns could not be completed.)` }
    const index = Math.max(offset, round.clientBlocks)
    text +=
      eventText({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } } }) +
      eventText({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: note.text } } }) +
      eventText({ event: 'content_block_stop', data: { type: 'content_block_stop', index } })
    visible.push(note)
  }
  return text + closingEvents(round.closing, usage, 'end_turn')
}

/** A JSON answer's turn: the same rounds, the client given one message (the last round's, with every round's visible blocks and usage). */
export async function relayRecallJson(reply: FastifyReply, res: UpstreamResponse, turn: RecallTurn): Promise<FastifyReply> {
  reply.removeHeader('content-length')
  let current = res
  let usage = emptyUsage()
  const rounds: Message[] = []
  const visible: unknown[] = []
  let last: Record<string, unknown> | undefined
  let pending: Block[] = []
  let stopReason: unknown
  for (let round = 1; ; round++) {
    const bytes = await readAll(current.body)
    let message: Record<string, unknown>
    try {
      message = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>
    } catch {
      message = {}
    }
    const content = Array.isArray(message.content) ? (message.content as Block[]) : undefined
    if (!content) {
      // not an answer the gateway can read: the first as it came, a later one ends the turn with what the client has
      if (round === 1) return reply.send(bytes)
      break
    }
    const roundUsage = addUsage(emptyUsage(), message.usage as Record<string, unknown> | undefined)
    usage = addUsage(usage, roundUsage)
    turn.onUsage?.(roundUsage)
    last = message
    stopReason = message.stop_reason
    rounds.push({ role: 'assistant', content })
    visible.push(...visibleBlocks(content))
    const calls = recallCalls(content)
    if (calls.length === 0) break
    const results = await answer(turn, calls, round)
    if (callsClientTools(content) || round > RECALL_ROUNDS + 1 || turn.aborted()) {
      pending = results
      if (!callsClientTools(content)) stopReason = 'end_turn'
      break
    }
    const next = await turn.send(continuation(rounds, results)).catch(() => undefined)
    if (!next || next.status !== 200) {
      next?.body.resume()
      pending = results
      stopReason = 'end_turn'
      break
    }
    rounds.push({ role: 'user', content: results })
    current = next
  }
  if (visible.length === 0) visible.push({ type: 'text', text: '(The search of earlier turns could not be completed.)' })
  const exchange = exchangeOf(rounds, visible, pending)
  if (exchange) turn.keep(exchange)
  const whole = Buffer.from(JSON.stringify({ ...last, content: visible, stop_reason: stopReason, usage: { ...(last?.usage as object), ...usage } }))
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
