/**
 * The drop-in proxies' HTTP side (the Messages API's, Chat Completions', Responses', Gemini's): the body kept
 * as its bytes; the request made ready by the proxy's service (service/proxy/requests.ts: what is done to it, what
 * is forwarded, the record and cold layer written while the upstream works); forwarded; the answer relayed
 * as it arrives. An API differs only in how its body is read and written back (its dialect), where it goes,
 * and with what credentials (ProxiedApi).
 */
import { EventEmitter } from 'node:events'
import type { OutgoingHttpHeaders } from 'node:http'
import type { Readable, Transform } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { keyedResponses } from '../routes/security.js'
import { UsageTap, type UpstreamUsage, type UsageFormat } from '../../proxy/usage.js'
import { EventCuts } from '../../proxy/events.js'
import type { ProxyOutcome } from '../../service/proxy/compactor.js'
import { type Upstream, type UpstreamResponse, clientHeaders, upstreamHeaders } from '../../proxy/upstream.js'
import { bodyParser } from '../body.js'
import { DEFAULT_BODY_LIMIT } from '../../contract/defaults.js'
import { errorBody } from '../errors.js'
import { ConfigurationError } from '../../contract/errors.js'
import { ProxiedBody } from '../../proxy/body.js'
import type { Forward, OfferedRecall, Paused, ProxiedDialect, ProxyPolicy, Relayed } from '../../service/proxy/requests.js'
import { RECORD_HEADER } from '../../service/served.js'
import { type RecallTurn, relayRecallJson, relayRecallStream } from './recall-relay.js'
import { type Message, PROXY_RECALL_TOOL } from '../../compaction/index.js'
import type { Summarizer } from '../../summarizer/summarizer.js'

/** One proxied API: the service's dialect of it (how its body is read and written back), where it goes and with what credentials. */
export interface ProxiedApi<R> extends ProxiedDialect<R> {
  /** Its path upstream, below the base URL. */
  path: string
  /** The setting that holds the gateway's key for it. */
  keySetting: string
  upstream: Upstream
  /** The credentials a request is forwarded with, or undefined when there are none. */
  credentials: (request: FastifyRequest) => Record<string, string> | undefined
  /** The query string sent upstream from the request's URL (as it came by default). */
  query?: (url: string) => string
}

/** A proxy plugin's options: its policy, and the credentials a request is forwarded with. */
export interface ProxyContext extends ProxyPolicy {
  /**
   * The credentials a request is forwarded with: the gateway's own key for the API, or (only when the
   * gateway checks no keys of its own and has none for the upstream) the client's; undefined when there are none.
   */
  credentials: (request: FastifyRequest) => Record<string, string> | undefined
}

/**
 * The hooks of a proxy plugin: bodies kept as bytes; each answer counted by endpoint, what compaction did
 * and status (a client that stops reading is dropped at the idle timeout, as on every route: timeoutsPlugin).
 * Returns where outcomes are noted.
 */
export function installProxyHooks(app: FastifyInstance, endpointOf: (url: string | undefined) => string): void {
  const { metrics } = app
  // In this plugin only: the body's bytes are kept, so that they can be forwarded unchanged, and read only
  // when the request may be compacted.
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser(
    'application/json',
    bodyParser(app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT, (bytes) => ({ value: new ProxiedBody(bytes) }))
  )
  app.decorateRequest('proxyOutcome', null)
  app.addHook('onResponse', (request, reply, done) => {
    metrics.proxyRequests.inc({
      endpoint: endpointOf(request.routeOptions.url),
      compaction: request.proxyOutcome ?? 'none',
      status: `${Math.floor(reply.statusCode / 100)}xx`
    })
    done()
  })
}

/**
 * A client's hang-up, told to what is being done for it: the upstream request (undici takes an EventEmitter
 * as its signal) and, through `signal`, whatever waits on an AbortSignal (a compaction's wait). The
 * AbortController is made only when something asks for its signal: one a request (and undici's listener on
 * it) cost the proxy 5–10% of its added latency (docs/performance.md).
 */
export class HangUp extends EventEmitter {
  aborted = false
  private controller: AbortController | undefined

  /** Aborted once the client has gone (its connection closed before the answer finished). */
  get signal(): AbortSignal {
    this.controller ??= new AbortController()
    if (this.aborted) this.controller.abort()
    return this.controller.signal
  }

  abort(): void {
    if (this.aborted) return
    this.aborted = true
    this.controller?.abort()
    this.emit('abort')
  }
}

/** A client that hangs up aborts what is being done for it (the compaction's wait, the upstream request). */
export function abortOnClose(reply: FastifyReply): HangUp {
  const hangUp = new HangUp()
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) hangUp.abort()
  })
  return hangUp
}

/**
 * An answer written to the client as its body arrives, past Fastify's send (reply.hijack): each chunk goes
 * from the upstream's body to the socket with no stream between them, as a bare relay's does (a stream hop
 * cost the answer about a tenth of a millisecond: docs/performance.md), the headers every answer carries
 * set first as the onSend hooks set them (reply.stamp, reply.watchClient). The body is paused while the
 * client does not read, so its pace holds the upstream. An event stream goes on at its events' ends, so
 * that when the upstream breaks off the gateway's error event follows a whole event (the part of one that
 * came is dropped) and an SDK client reads the error instead of a cut JSON (the event's `error` object is
 * what the Anthropic and OpenAI SDKs both read from an event's data); any other body broken off closes the
 * connection, logged. `usage` reads each chunk once it has gone on, and is told the end: in a microtask, which
 * runs once the socket has been written (Node writes what a turn gave it at the turn's end, before the
 * microtasks), so that what the gateway reads of the answer never holds its bytes back.
 */
function writeAnswer(
  reply: FastifyReply,
  body: Readable,
  events: { api: string; aborted: () => boolean } | undefined,
  usage?: { tap: UsageTap; done: (usage: UpstreamUsage | undefined) => void }
): FastifyReply {
  reply.stamp()
  reply.watchClient()
  const raw = reply.raw
  // (Fastify's header values are what Node takes; its type lets a number be any header's.) Written before the
  // hijack, so that a header Node refuses is answered by Fastify's error handler, not left without an answer.
  raw.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders)
  reply.hijack()
  const cuts = events ? new EventCuts() : undefined
  let over = false
  raw.on('drain', () => body.resume())
  body.on('data', (chunk: Buffer) => {
    const bytes = cuts ? cuts.take(chunk) : chunk
    const full = bytes !== undefined && bytes.length > 0 && !raw.write(bytes)
    if (usage) queueMicrotask(() => usage.tap.push(chunk))
    if (full) body.pause()
  })
  body.once('end', () => {
    if (over) return
    over = true
    const rest = cuts?.rest()
    if (rest) raw.end(rest)
    else raw.end()
    if (usage) queueMicrotask(() => usage.done(usage.tap.end()))
  })
  body.once('error', (err) => {
    if (over) return
    over = true
    if (raw.destroyed) return
    if (events) {
      cuts?.rest() // the part of an event that came is dropped
      if (!events.aborted()) {
        const event = errorBody('api_error', `${events.api} stream broke off: ${err.message}`)
        raw.write(`event: error\ndata: ${JSON.stringify(event)}\n\n`)
      }
      raw.end()
      return
    }
    reply.log.warn({ err }, 'the upstream broke off its answer after its headers were sent: the connection is closed')
    raw.destroy()
  })
  return reply
}

/** The upstream's answer relayed: its status and headers, what the gateway did, its body as it arrives (an event stream event by event). */
function relay(
  reply: FastifyReply,
  api: { name: string; usage?: UsageFormat },
  res: UpstreamResponse,
  outcome: ProxyOutcome,
  notRead: string | undefined,
  aborted: () => boolean,
  onUsage?: (usage: UpstreamUsage | undefined) => void,
  rewrite?: (stream: boolean) => Transform,
  /** The history was changed though nothing was compacted (cleared tool results). */
  changed = false,
  /** The gateway's recall tool was added to the request's tools (its name). */
  recallTool?: string
): FastifyReply {
  void reply.code(res.status).headers(clientHeaders(res.headers))
  void reply.header('x-compaction', outcome.kind === 'none' && !changed ? 'none' : 'compacted')
  if (notRead) void reply.header('x-compaction-not-read', notRead)
  if (outcome.kind !== 'none') void reply.header('x-compaction-summary-id', outcome.summaryId)
  if (recallTool) void reply.header('x-compaction-recall-tool', recallTool)
  const contentType = res.headers['content-type']
  const stream = typeof contentType === 'string' && contentType.startsWith('text/event-stream')
  const tapping = onUsage !== undefined && res.status === 200
  // what the gateway performed of the API's context management, in the answer as the API gives it (its length
  // changes: sent chunked); the usage read from the upstream's own bytes, before they are rewritten
  const events = stream ? { api: api.name, aborted } : undefined
  if (rewrite && res.status === 200) {
    reply.removeHeader('content-length')
    if (tapping) {
      const tap = new UsageTap(stream, api.usage)
      res.body.on('data', (chunk: Buffer) => tap.push(chunk))
      res.body.once('end', () => onUsage(tap.end()))
    }
    const rewritten = res.body.pipe(rewrite(stream))
    res.body.on('error', (err) => rewritten.destroy(err))
    return writeAnswer(reply, rewritten, events)
  }
  return writeAnswer(reply, res.body, events, tapping ? { tap: new UsageTap(stream, api.usage), done: onUsage } : undefined)
}

/**
 * One proxied request: compacted past its budget, forwarded byte for byte under it, the answer streamed
 * back as it arrives, with `x-compaction: none|compacted`, `x-compaction-summary-id`, and
 * `x-compaction-not-read` where the gateway could not read the history (why).
 */
export async function proxyRequest<R>(
  app: FastifyInstance,
  context: ProxyContext,
  api: ProxiedApi<R>,
  request: FastifyRequest,
  reply: FastifyReply
): Promise<FastifyReply> {
  const started = performance.now()
  const hangUp = abortOnClose(reply)
  const prepared = await app.proxy.service.prepare(api, {
    body: request.body as ProxiedBody,
    headers: request.headers,
    keyName: request.keyName,
    policy: context,
    forwardHeaders: () => {
      const credentials = api.credentials(request)
      if (!credentials) throw new ConfigurationError(`the gateway has no key for ${api.name}: set ${api.keySetting} on the gateway`)
      return upstreamHeaders(request.headers, credentials)
    },
    hangUp,
    log: request.log,
    started
  })
  const { outcome, scheduled } = prepared
  request.proxyOutcome = outcome.kind
  if (scheduled.unkept) void reply.header(RECORD_HEADER, 'not-kept')
  if (scheduled.begin) reply.raw.once('close', scheduled.begin)
  if (prepared.kind === 'paused') return answerPaused(reply, prepared)
  return forwardPrepared(api, request, reply, prepared, hangUp)
}

/** The gateway's own answer, its compaction block alone (compact_20260112 paused, compaction on demand). */
function answerPaused(reply: FastifyReply, prepared: Paused): FastifyReply {
  void reply
    .code(200)
    .header('content-type', prepared.contentType)
    .header('x-compaction', prepared.outcome.kind === 'none' ? 'none' : 'compacted')
  if (prepared.outcome.summaryId !== undefined) void reply.header('x-compaction-summary-id', prepared.outcome.summaryId)
  if (prepared.summarizer !== undefined) void reply.header('x-compaction-summarizer', prepared.summarizer)
  return reply.send(prepared.body)
}

/** The prepared request sent upstream, what was done noted once it answers, and the answer relayed (through the recall tool's rounds where it was offered). */
async function forwardPrepared<R>(api: ProxiedApi<R>, request: FastifyRequest, reply: FastifyReply, prepared: Forward, hangUp: HangUp): Promise<FastifyReply> {
  const { scheduled } = prepared
  const asked = performance.now()
  // The query string goes on as it came (Claude Code's `?beta=true`).
  const query = request.url.indexOf('?')
  const search = api.query ? api.query(request.url) : query < 0 ? '' : request.url.slice(query)
  const sending = api.upstream.send(`${api.path}${search}`, prepared.headers, prepared.payload, hangUp)
  if (scheduled.begin) setImmediate(scheduled.begin)
  const res = await sending.finally(prepared.began)
  const upstreamMs = performance.now() - asked
  await scheduled.recorded // the record's writes log and count their own failures: they never reject
  const relayed = prepared.answered(res.status, asked, upstreamMs)
  // (a proxied request's one line is written once, so its fields are set once)
  request.lineFields = relayed.line
  const recall = prepared.recall
  if (recall && res.status === 200) return relayRecall(api, reply, res, prepared, recall, relayed, `${api.path}${search}`, hangUp)
  return relay(
    reply,
    api,
    res,
    prepared.outcome,
    prepared.notRead,
    () => hangUp.aborted,
    relayed.onUsage,
    relayed.rewrite,
    prepared.changed,
    prepared.recallTool
  )
}

/** An answer where the model was offered the gateway's recall tool: its calls answered and the turn continued upstream (recall-relay.ts). */
async function relayRecall<R>(
  api: ProxiedApi<R>,
  reply: FastifyReply,
  res: UpstreamResponse,
  prepared: Forward,
  recall: OfferedRecall,
  relayed: Relayed,
  path: string,
  hangUp: HangUp
): Promise<FastifyReply> {
  void reply.code(res.status).headers(clientHeaders(res.headers)).header('x-compaction', 'compacted').header('x-compaction-recall-tool', PROXY_RECALL_TOOL)
  if (prepared.outcome.kind !== 'none') void reply.header('x-compaction-summary-id', prepared.outcome.summaryId)
  const turn: RecallTurn = {
    search: (call) => recall.search(call),
    send: (added) => api.upstream.send(path, prepared.headers, recall.continuation(added), hangUp),
    keep: (exchange) => recall.keep(exchange),
    ...(relayed.onUsage ? { onUsage: relayed.onUsage } : {}),
    ...(relayed.rewrite ? { rewrite: relayed.rewrite } : {}),
    aborted: () => hangUp.aborted
  }
  const contentType = res.headers['content-type']
  if (typeof contentType === 'string' && contentType.startsWith('text/event-stream')) {
    await relayRecallStream(reply, res, turn, api.name, recall.format)
    return reply
  }
  return relayRecallJson(reply, res, turn, recall.format)
}

/**
 * `POST /v1/responses/compact` answered by the gateway, for an upstream without the Responses API's
 * compaction (service/proxy/requests.ts: ProxyService.compactResponses).
 */
export async function compactResponsesHere(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  clientModel?: (body: ProxiedBody, headers: Record<string, string>) => ((messages: Message[]) => Summarizer) | undefined
): Promise<FastifyReply> {
  const hangUp = abortOnClose(reply)
  const body = request.body as ProxiedBody
  // the conversation's own model writes the summary (COMPACT_PROXY_SUMMARIES), with the credentials it is forwarded with
  const credentials = app.proxy.policy.openai.clientSummaries ? app.proxy.policy.openai.credentials(request) : undefined
  const model = credentials && clientModel ? clientModel(body, upstreamHeaders(request.headers, credentials)) : undefined
  const answer = await app.proxy.service.compactResponses(
    body,
    { headers: request.headers, keyName: request.keyName, hangUp, log: request.log, started: performance.now() },
    model
  )
  const { scheduled } = answer
  if (scheduled.unkept) void reply.header(RECORD_HEADER, 'not-kept')
  if (scheduled.begin) reply.raw.once('close', scheduled.begin)
  if (answer.summaryId !== undefined) void reply.header('x-compaction-summary-id', answer.summaryId)
  void reply.header('x-compaction', answer.summaryId !== undefined ? 'compacted' : 'none')
  return reply.code(200).header('content-type', 'application/json').send(JSON.stringify(answer.body))
}

/** The contract's headers of a proxied request; `sessionSources`: where the session comes from by default. */
export function proxyHeaders(sessionSources: string) {
  return Type.Object({
    'x-compaction-budget': Type.Optional(
      Type.String({ description: 'The prompt size (tokens) past which this request is compacted, or "off"; COMPACT_BUDGET by default.' })
    ),
    'x-compaction-session': Type.Optional(Type.String({ description: `The session (1 to 200 characters); by default ${sessionSources}.` }))
  })
}

/** The contract's answer of a proxied request: the upstream's, as it came. */
export function upstreamAnswer(description: string) {
  return {
    description,
    content: { 'application/json': { schema: Type.Object({}, { additionalProperties: true }) }, 'text/event-stream': { schema: Type.String() } }
  }
}

/** The contract's errors of a proxied request: the gateway's own, and the upstream's passed on. */
export function proxyErrors(unreadable: string, upstream: { name: string; failures: string }) {
  return {
    ...keyedResponses(),
    400: Type.Ref('ErrorResponse', { description: unreadable }),
    413: Type.Ref('ErrorResponse', { description: 'The body is over COMPACT_BODY_LIMIT_MB.' }),
    502: Type.Ref('ErrorResponse', { description: `${upstream.name} could not be reached (or the model summary failed and COMPACT_FALLBACK=error).` }),
    504: Type.Ref('ErrorResponse', { description: `${upstream.name} did not begin to answer within COMPACT_UPSTREAM_TIMEOUT_MS.` }),
    '4XX': Type.Ref('ErrorResponse', { description: `${upstream.name}'s own refusals come back with their status, body and headers.` }),
    '5XX': Type.Ref('ErrorResponse', { description: `${upstream.name}'s own failures${upstream.failures} come back with their status, body and retry-after.` })
  }
}
