/**
 * The drop-in proxies' one path (the Messages API's, Chat Completions', Responses'): the body kept as its
 * bytes, read only when it may be compacted; compaction by the proxy's compactor; the record and cold layer
 * written while the upstream works; the answer relayed as it arrives. An API differs only in how its body
 * is read and written back, where it goes, and with what credentials (ProxiedApi).
 */
import { type Readable, Transform } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { keyedResponses } from './routes/security.js'
import type { ItemsField } from '../contract/wire.js'
import type { ClientSummaries } from '../proxy/client-summaries.js'
import { UsageTap, type UpstreamUsage } from '../proxy/usage.js'
import { EventCuts, topLevelField } from '../proxy/events.js'
import { CHARS_PER_TOKEN, type Message } from '../compaction/index.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import type { ProxyOutcome, ProxyRequest } from '../service/proxy-compactor.js'
import { type ProxyParts, derivedSession, farUnderBudget, ownSession, budgetTokensOf, proxySession } from '../proxy/request.js'
import { type Upstream, type UpstreamResponse, clientHeaders, upstreamHeaders } from '../proxy/upstream.js'
import { InvalidHistoryError } from '../service/errors.js'
import { bodyParser } from './body.js'
import { DEFAULT_BODY_LIMIT } from '../contract/defaults.js'
import { errorBody } from './errors.js'
import { ConfigurationError, InvalidRequestError } from '../contract/errors.js'
import { parseJsonBody } from './json.js'
import {
  OWN_ITEM_KEY,
  compactedResponse,
  compactionItem,
  readBackItems,
  readResponsesContextManagement,
  withCompactionItem
} from '../proxy/responses-compaction.js'
import { bodyReader, readCompactRequest } from '../contract/validation.js'
import { ResponsesCompactBody, type ResponsesBody } from '../contract/proxy-bodies.js'
import { summarized } from '../service/compact.js'
import {
  type ContextManagement,
  type CompactEdit,
  type EditedMessages,
  CLEARED_RECALL_NOTE,
  applyContextEdits,
  compactionBlock,
  fromCompaction,
  pausedAnswer,
  readContextManagement,
  withAppliedEdits,
  withoutConsumedBetas
} from '../proxy/context-management.js'
import { jsonBytes } from '../contract/wire.js'
import { readMessagesRequest } from '../proxy/request.js'
import type { ClearedHistory } from '../proxy/openai.js'
import { type ClearedUse, redact } from '../compaction/index.js'
import { passages } from '../memory/entries.js'
import { RECORD_HEADER, type Scheduled, keepInColdLayer } from '../service/served.js'

/** A proxied body: its bytes as they came (forwarded as they are when nothing is compacted), read only when needed. */
export class ProxiedBody {
  private parsed: unknown
  constructor(readonly bytes: Buffer) {}

  /** Its JSON, parsed once (`field`: the history's array, parsed element by element), or the 400 that says why it is not. */
  value(field: ItemsField = 'messages'): unknown {
    if (this.parsed === undefined) {
      const parsed = parseJsonBody(this.bytes, field)
      if (parsed.error) throw parsed.error
      this.parsed = parsed.value
    }
    return this.parsed
  }
}

/** What an API's body gave the proxy: the parts its compactor reads, or nothing (forwarded unread), with why when it matters. */
export type ProxyRead<R> = { parts: ProxyParts; read: R } | { unread: string | undefined }

/** One proxied API: where it goes, how its body is read and written back. */
export interface ProxiedApi<R> {
  /** The metrics' and log's name of the endpoint. */
  endpoint: string
  /** Its path upstream, below the base URL. */
  path: string
  /** The API's name, in errors ("the Messages API"). */
  name: string
  /** The setting that holds the gateway's key for it. */
  keySetting: string
  upstream: Upstream
  /** The credentials a request is forwarded with, or undefined when there are none. */
  credentials: (request: FastifyRequest) => Record<string, string> | undefined
  /** Reads the body, which is not far under the budget (or has none). */
  read(body: ProxiedBody, budgetMayPass: () => boolean): ProxyRead<R>
  /**
   * The body to forward when the history was compacted or an earlier summary stands in for its start
   * (`outcome`), or its old tool results were cleared (`cleared`: the core's messages with them, and where
   * each is), or both.
   */
  write(body: ProxiedBody, read: R, outcome: Exclude<ProxyOutcome, { kind: 'none' }> | undefined, cleared?: ClearedHistory): Buffer
  /** Whether a result the core reads at (message, block) cannot take a placeholder in the client's body (clearing leaves it). */
  fixed?: (read: R, message: number, block: number) => boolean
  /** Where, in the client's body, a problem the core found at one of its messages is (its path). */
  place?(read: R, path: string): string
  /**
   * Where the client's own model may write the conversation's summaries (the generation endpoints): the
   * summarizer of this request, from its body, the headers it is forwarded with, a promise settled once
   * the upstream has begun to answer, and the bytes it was forwarded as (set by then).
   */
  clientSummarizer?: (
    settings: ClientSummaries,
    body: ProxiedBody,
    read: R,
    headers: Record<string, string>,
    after: Promise<unknown>,
    forwarded: () => Buffer | undefined
  ) => ((messages: Message[]) => Summarizer) | undefined
  /** Whether the answers' usage is the Messages API's, counted into the session's cost. */
  costs?: true
  /** Whether its requests may carry the Messages API's `context_management` edits, which the gateway performs (context-management.ts). */
  contextManagement?: true
  /** The query string sent upstream from the request's URL (as it came by default). */
  query?: (url: string) => string
  /** Whether its requests may carry the Responses API's compaction (`context_management`, the gateway's own compaction items: responses-compaction.ts). */
  responsesCompaction?: true
}

/** A proxy plugin's options. */
export interface ProxyContext {
  /** COMPACT_BUDGET: the prompt size from which a proxied request is compacted. */
  budgetTokens: number | 'off'
  /**
   * The credentials a request is forwarded with: the gateway's own key for the API, or (only when the
   * gateway checks no keys of its own and has none for the upstream) the client's; undefined when there are none.
   */
  credentials: (request: FastifyRequest) => Record<string, string> | undefined
  /** Set where the gateway has no model of its own: summaries are written by the client's, with its credentials. */
  clientSummaries?: ClientSummaries
  /** COMPACT_CONTEXT_MANAGEMENT: the Messages API's context editing performed by the gateway, or forwarded untouched. */
  contextManagement?: 'gateway' | 'forward'
}

/** A request whose context management the gateway performed: the body to go on with, what the edits did, and the compaction asked for. */
interface Managed {
  body: ProxiedBody
  edited: EditedMessages
  compact: CompactEdit | undefined
  /** No edit could change the body (read from its bytes): the answer goes as the upstream gave it (`context_management` absent, nothing applied). */
  quiet?: true
}

/** The key of the field, as its bytes: a body without it is never parsed for it. */
const CONTEXT_MANAGEMENT_KEY = Buffer.from('"context_management"')

/** Passages of one cleared result's output the cold layer keeps (1,200 characters each): its head, where what it says begins. */
const MAX_EVIDENCE_PASSAGES = 12

const recallNote = CLEARED_RECALL_NOTE

/**
 * The Messages API's context editing, performed by the gateway where the request asks for it: the body
 * edited and without the field, or undefined where there is nothing to perform (no field; a
 * `compact_20260112` edit, forwarded untouched).
 */
function manageContext(body: ProxiedBody): Managed | undefined {
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
  if (quick && nothingToDo(quick, body.bytes))
    return { body: new ProxiedBody(field.without), edited: { messages: [], applied: [], cleared: [] }, compact: quick.compact, quiet: true }
  const value = body.value()
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const management = readContextManagement(value as Record<string, unknown>)
  if (management === undefined) return undefined
  const { context_management: _performed, ...rest } = value as Record<string, unknown>
  const parts = readMessagesRequest(value)
  // with compaction asked for, a history is read from its newest compaction block on, as the API reads it
  const read = management.compact ? { ...parts, messages: fromCompaction(parts.messages).messages } : parts
  const edited = applyContextEdits(read, management.edits, recallNote)
  return { body: new ProxiedBody(Buffer.from(jsonBytes({ ...rest, messages: edited.messages }))), edited, compact: management.compact }
}

/** A Responses request whose compaction the gateway performs: the body to go on with (read from its newest own item on), and the threshold asked for. */
interface ManagedResponses {
  body: ProxiedBody
  threshold: number | undefined
}

/** The Responses API's compaction, performed by the gateway where asked for or where the input holds its own item; undefined where neither. */
function manageResponses(body: ProxiedBody): ManagedResponses | undefined {
  if (!body.bytes.includes(OWN_ITEM_KEY) && !body.bytes.includes(CONTEXT_MANAGEMENT_KEY)) return undefined
  const value = body.value('input')
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const fields = value as Record<string, unknown>
  const asked = readResponsesContextManagement(fields)
  const back = Array.isArray(fields.input) ? readBackItems(fields.input) : { input: fields.input, read: false }
  if (!asked && !back.read) return undefined
  const { context_management: _performed, ...rest } = fields
  return { body: new ProxiedBody(Buffer.from(JSON.stringify({ ...rest, input: back.input }))), threshold: asked?.threshold }
}

/** Whether no edit asked for could change this body, read from its bytes alone. */
function nothingToDo(management: ContextManagement, bytes: Buffer): boolean {
  if (management.compact && bytes.includes(COMPACTION_TYPE)) return false
  return management.edits.every((edit) =>
    edit.type === 'clear_thinking_20251015'
      ? edit.keep === 'all' || !bytes.includes(THINKING_TYPE)
      : edit.trigger.type === 'input_tokens' && farUnderBudget(bytes, edit.trigger.value)
  )
}

/** The bytes that say a history may hold a compaction block, or thinking. */
const COMPACTION_TYPE = Buffer.from('"compaction"')
const THINKING_TYPE = Buffer.from('thinking"')

/** Keeps the whole output of each cleared result in the session's cold layer, once a process (a result is cleared again at every request after). */
function keepClearedEvidence(app: FastifyInstance, request: FastifyRequest, session: string | undefined, cleared: readonly ClearedUse[]): void {
  if (session === undefined || cleared.length === 0) return
  const kept = app.proxy.clearedKept
  const fresh = cleared.filter((c) => !kept.has(`${request.keyName}\u0000${session}\u0000${c.tool_use_id}`))
  if (fresh.length === 0) return
  for (const c of fresh) kept.add(`${request.keyName}\u0000${session}\u0000${c.tool_use_id}`)
  const rows = fresh.flatMap((c) =>
    passages(redact(c.evidence))
      .slice(0, MAX_EVIDENCE_PASSAGES)
      .map((text) => ({ kind: 'evidence' as const, text, from: c.message, to: c.message }))
  )
  void keepInColdLayer(app, { keyName: request.keyName, session, log: request.log }, rows, "a cleared tool result's output could not be kept in the cold layer")
}

/**
 * An event stream relayed event by event: bytes go on at each event's blank line, so that when the
 * upstream breaks off the gateway's error event follows a whole event (the part of one that came is
 * dropped), and an SDK client reads the error instead of a cut JSON. The event's `error` object is what
 * the Anthropic and OpenAI SDKs both read from an event's data.
 */
function withErrorEvent(
  body: Readable,
  api: string,
  aborted: () => boolean,
  usage?: { tap: UsageTap; done: (usage: UpstreamUsage | undefined) => void }
): Readable {
  const cuts = new EventCuts()
  const relay = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      // the answer's usage read here too, where nothing rewrites the answer: one pass over its bytes
      usage?.tap.push(chunk)
      done(null, cuts.take(chunk))
    },
    flush(done) {
      usage?.done(usage.tap.end())
      done(null, cuts.rest())
    }
  })
  body.on('error', (err) => {
    body.unpipe(relay)
    cuts.rest() // the part of an event that came is dropped
    if (aborted()) return void relay.end()
    const event = errorBody('api_error', `${api} stream broke off: ${err.message}`)
    relay.end(Buffer.from(`event: error\ndata: ${JSON.stringify(event)}\n\n`))
  })
  body.pipe(relay)
  return relay
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

/** A client that hangs up aborts what is being done for it (the compaction's wait, the upstream request). */
export function abortOnClose(reply: FastifyReply): AbortController {
  const abort = new AbortController()
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) abort.abort()
  })
  return abort
}

/** The body as the compactor reads it; one whose bytes alone are far under the budget is forwarded unread (nothing could be done to it). */
function readProxied<R>(
  app: FastifyInstance,
  api: ProxiedApi<R>,
  body: ProxiedBody,
  budgetTokens: number | 'off',
  clientModel: boolean,
  named: boolean
): ProxyRead<R> {
  if (budgetTokens !== 'off' && farUnderBudget(body.bytes, budgetTokens * app.proxy.compactor.quietShare(clientModel, named))) return { unread: undefined }
  return api.read(body, () => budgetTokens === 'off' || !farUnderBudget(body.bytes, budgetTokens))
}

/** What the compactor does to the history: every refusal of its content a 400, at its place in the client's body. */
async function compactProxied<R>(
  app: FastifyInstance,
  api: ProxiedApi<R>,
  read: ProxyRead<R>,
  request: FastifyRequest,
  at: {
    session: string | undefined
    budgetTokens: number | 'off'
    signal: AbortSignal
    clientSummarizer?: ProxyRequest['clientSummarizer']
    instructions?: string
  }
): Promise<ProxyOutcome> {
  if (!('parts' in read)) return { kind: 'none', tokens: undefined }
  const { messages, system, tools } = read.parts
  try {
    return await app.proxy.compactor.prepare({
      messages,
      system,
      tools,
      keyName: request.keyName,
      session: at.session,
      budgetTokens: at.budgetTokens,
      signal: at.signal,
      ...(at.clientSummarizer ? { clientSummarizer: at.clientSummarizer } : {}),
      ...(at.instructions ? { instructions: at.instructions } : {})
    })
  } catch (err) {
    if (err instanceof InvalidHistoryError) throw new InvalidRequestError(err.message, api.place ? api.place(read.read, err.path ?? '') : err.path)
    throw err
  }
}

/**
 * A proxied compaction served (service/served.ts): counted, logged, tallied and recorded. The record and the
 * cold layer never hold the forward: they are written while the model works on the forwarded request, and
 * the answer waits for the record. With SQLite, whose indexing holds this thread, the cold layer begins once
 * the request is on its way (`begin`), reads of the session waiting for it; with a store other replicas read,
 * the answer waits too.
 */
async function serveProxied(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  endpoint: string,
  outcome: ProxyOutcome,
  at: { session: string | undefined; budgetTokens: number | 'off'; started: number }
): Promise<Scheduled> {
  if (outcome.kind !== 'compacted') return {}
  const served = await app.serve(outcome.run, {
    via: 'proxy',
    keyName: request.keyName,
    session: at.session,
    mode: 'auto',
    budgetTokens: at.budgetTokens,
    log: request.log,
    started: at.started,
    endpoint,
    source: outcome.source,
    waitMs: performance.now() - at.started
  })
  if (served.unkept) void reply.header(RECORD_HEADER, 'not-kept')
  if (served.begin) reply.raw.once('close', served.begin)
  return served
}

/**
 * The answer's body with its `usage` read as it passes (UsageTap), `done` given it at the end; the body's
 * errors go on to the relay as they were.
 */
function withUsageTap(body: Readable, stream: boolean, done: (usage: UpstreamUsage | undefined) => void): Readable {
  const tap = new UsageTap(stream)
  const tapped = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      tap.push(chunk)
      next(null, chunk)
    },
    flush(next) {
      done(tap.end())
      next()
    }
  })
  body.on('error', (err) => tapped.destroy(err))
  return body.pipe(tapped)
}

/** The upstream's answer relayed: its status and headers, what the gateway did, its body as it arrives (an event stream event by event). */
function relay(
  reply: FastifyReply,
  api: { name: string },
  res: UpstreamResponse,
  outcome: ProxyOutcome,
  notRead: string | undefined,
  aborted: () => boolean,
  onUsage?: (usage: UpstreamUsage | undefined) => void,
  rewrite?: (stream: boolean) => Transform,
  /** The history was changed though nothing was compacted (cleared tool results). */
  changed = false
): FastifyReply {
  void reply.code(res.status).headers(clientHeaders(res.headers))
  void reply.header('x-compaction', outcome.kind === 'none' && !changed ? 'none' : 'compacted')
  if (notRead) void reply.header('x-compaction-not-read', notRead)
  if (outcome.kind !== 'none') void reply.header('x-compaction-summary-id', outcome.summaryId)
  const contentType = res.headers['content-type']
  const stream = typeof contentType === 'string' && contentType.startsWith('text/event-stream')
  const tapping = onUsage !== undefined && res.status === 200
  // what the gateway performed of the API's context management, in the answer as the API gives it (its length
  // changes: sent chunked); the usage read from the upstream's own bytes, before they are rewritten
  if (rewrite && res.status === 200) {
    reply.removeHeader('content-length')
    const tapped = tapping ? withUsageTap(res.body, stream, onUsage) : res.body
    const body = tapped.pipe(rewrite(stream))
    tapped.on('error', (err) => body.destroy(err))
    return reply.send(stream ? withErrorEvent(body, api.name, aborted) : body)
  }
  if (stream) return reply.send(withErrorEvent(res.body, api.name, aborted, tapping ? { tap: new UsageTap(true), done: onUsage } : undefined))
  return reply.send(tapping ? withUsageTap(res.body, false, onUsage) : res.body)
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
  const performs = context.contextManagement !== 'forward'
  const managed = api.contextManagement && performs ? manageContext(request.body as ProxiedBody) : undefined
  const responses = api.responsesCompaction && performs ? manageResponses(request.body as ProxiedBody) : undefined
  const body = managed?.body ?? responses?.body ?? (request.body as ProxiedBody)
  // the gateway's own headers are checked on every request, read or not: one it cannot use is refused, named
  const headerBudget = budgetTokensOf(request.headers['x-compaction-budget'], context.budgetTokens)
  // compact_20260112: the gateway's compaction is the one asked for, at its trigger
  const budgetTokens = managed?.compact ? managed.compact.trigger : (responses?.threshold ?? headerBudget)
  ownSession(request.headers)
  const credentials = api.credentials(request)
  if (!credentials) throw new ConfigurationError(`the gateway has no key for ${api.name}: set ${api.keySetting} on the gateway`)
  const abort = abortOnClose(reply)
  const headersUp = managed ? withoutConsumedBetas(upstreamHeaders(request.headers, credentials)) : upstreamHeaders(request.headers, credentials)

  const named = proxySession(request.headers, undefined) !== undefined
  let read = readProxied(app, api, body, budgetTokens, context.clientSummaries !== undefined && api.clientSummarizer !== undefined, named)
  // every conversation on record: one whose client names no session gets a stable id of the gateway's
  // (a body forwarded unread has the session its headers name, if any: its cost is counted there)
  const session = 'parts' in read ? (proxySession(request.headers, read.parts.userId) ?? derivedSession(read.parts)) : proxySession(request.headers, undefined)
  // clearing first (COMPACT_STRATEGY): the Messages API's history, its old tool results cleared where that is enough
  const readBody = 'parts' in read ? read : undefined
  const fixed = api.fixed
  const cleared =
    app.proxy.clearing && !managed?.compact && !responses && readBody
      ? app.proxy.clearing.apply(`${request.keyName}\u0000${session}`, readBody.parts, budgetTokens, fixed ? (m, b) => fixed(readBody.read, m, b) : undefined)
      : undefined
  if (cleared?.changed && 'parts' in read) read = { parts: { ...read.parts, messages: cleared.messages }, read: read.read }
  // The client's own model writes summaries ahead where the gateway has none, once the upstream has begun to
  // answer this request (its prefix is then in the cache the summary call reads).
  let answered = (): void => undefined
  const after = new Promise<void>((resolve) => (answered = resolve))
  const forwarded: { bytes?: Buffer } = {}
  const forClient =
    context.clientSummaries && api.clientSummarizer && 'read' in read
      ? api.clientSummarizer(context.clientSummaries, body, read.read, headersUp, after, () => forwarded.bytes)
      : undefined
  const instructions = managed?.compact?.instructions
  const outcome = await compactProxied(app, api, read, request, {
    session,
    budgetTokens,
    signal: abort.signal,
    ...(forClient ? { clientSummarizer: forClient } : {}),
    ...(instructions ? { instructions } : {})
  }).catch((err: unknown) => {
    answered()
    throw err
  })
  request.proxyOutcome = outcome.kind

  // compact_20260112: the compaction (new, or an earlier one standing in) given to the client as the API gives it
  const compaction =
    managed?.compact && outcome.kind !== 'none'
      ? {
          summaryId: outcome.summaryId,
          block: compactionBlock(outcome.messages),
          usage:
            outcome.kind === 'compacted'
              ? { input_tokens: outcome.run.response.summarizer.input_tokens, output_tokens: outcome.run.response.summarizer.output_tokens }
              : { input_tokens: 0, output_tokens: 0 }
        }
      : undefined
  if (managed && compaction && managed.compact?.pauseAfterCompaction) {
    answered()
    await (
      await serveProxied(app, request, reply, api.endpoint, outcome, { session, budgetTokens, started })
    ).recorded
    const value = body.value() as Record<string, unknown>
    const paused = pausedAnswer(value.model, value.stream === true, compaction.block, compaction.usage, managed.edited.applied)
    request.proxyOutcome = outcome.kind
    return reply
      .code(200)
      .header('content-type', paused.contentType)
      .header('x-compaction', 'compacted')
      .header('x-compaction-summary-id', compaction.summaryId)
      .send(paused.body)
  }

  const clearedHistory = cleared?.changed ? { messages: cleared.messages, uses: cleared.uses } : undefined
  const payload = !('read' in read)
    ? body.bytes
    : outcome.kind !== 'none' || clearedHistory
      ? api.write(body, read.read, outcome.kind === 'none' ? undefined : outcome, clearedHistory)
      : body.bytes
  forwarded.bytes = payload
  const { recorded, begin } = await serveProxied(app, request, reply, api.endpoint, outcome, { session, budgetTokens, started })
  const asked = performance.now()
  // The query string goes on as it came (Claude Code's `?beta=true`).
  const query = request.url.indexOf('?')
  const search = api.query ? api.query(request.url) : query < 0 ? '' : request.url.slice(query)
  const sending = api.upstream.send(`${api.path}${search}`, headersUp, payload, abort.signal)
  if (begin) setImmediate(begin)
  const res = await sending.finally(answered)
  const upstreamMs = performance.now() - asked
  await recorded // the record's writes log and count their own failures: they never reject
  app.metrics.proxyUpstreamSeconds.observe({ endpoint: api.endpoint }, upstreamMs / 1_000)
  if (outcome.kind === 'compacted') app.metrics.crossingWait.observe((asked - started) / 1_000)

  const notRead = 'unread' in read ? read.unread : undefined
  if (managed) keepClearedEvidence(app, request, session, managed.edited.cleared)
  if (cleared && cleared.newly.length > 0) {
    keepClearedEvidence(app, request, session, cleared.newly)
    app.activity.clearing(request.keyName, session, {
      tokens: cleared.newly.reduce((n, c) => n + c.tokens, 0),
      uses: cleared.newly.length,
      waitMs: asked - started
    })
  }
  // On the request's one line, written when the answer ends (a line of its own cost a write a request).
  // (a proxied request's one line is written once, so its fields are set once)
  request.lineFields = {
    event: 'proxied',
    endpoint: api.endpoint,
    status: res.status,
    compaction: outcome.kind,
    ...(notRead ? { not_read: notRead } : {}),
    summary_id: outcome.kind === 'none' ? undefined : outcome.summaryId,
    // a crossing's size as it crossed the budget, and what was forwarded in its place
    estimated_tokens: outcome.kind === 'compacted' ? outcome.crossed : outcome.tokens,
    ...(outcome.kind === 'compacted' ? { forwarded_tokens: outcome.tokens, source: outcome.source } : {}),
    session_id: session,
    prepare_ms: Math.round(asked - started),
    upstream_ms: Math.round(upstreamMs)
  }
  // A session's cost: what the upstream says each answer cost, and what compaction kept out of the request.
  const keptOut = outcome.kind === 'none' ? 0 : (body.bytes.length - payload.length) / CHARS_PER_TOKEN
  const onUsage = api.costs
    ? (usage: UpstreamUsage | undefined) => app.activity.request(request.keyName, session, { keptOut, metered: true, usage })
    : undefined
  if (!api.costs && res.status === 200) app.activity.request(request.keyName, session, { keptOut, metered: false })
  // the Responses API's compaction: its item first in the output, standing for the input as forwarded
  const item =
    responses?.threshold !== undefined && outcome.kind !== 'none'
      ? compactionItem((JSON.parse(payload.toString('utf8')) as { input: unknown[] }).input)
      : undefined
  const rewrite =
    managed && !(managed.quiet && !compaction)
      ? (stream: boolean) => withAppliedEdits(stream, { applied_edits: managed.edited.applied }, compaction)
      : item
        ? (stream: boolean) => withCompactionItem(stream, item)
        : undefined
  return relay(reply, api, res, outcome, notRead, () => abort.signal.aborted, onUsage, rewrite, cleared?.changed === true)
}

/**
 * `POST /v1/responses/compact` answered by the gateway, for an upstream without the Responses API's
 * compaction: the input (read from the gateway's newest own item on) compacted as `/v1/compact` compacts a
 * Responses history (`mode: manual`), recorded under its session, and answered as the API answers, the input's
 * user messages then one `compaction` item that stands for the compacted input.
 */
/** The route's own schema, the one check of its body (as the proxied Responses compaction reads it). */
const checkResponsesCompaction = bodyReader<ResponsesBody>(ResponsesCompactBody)

export async function compactResponsesHere(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const checked = checkResponsesCompaction((request.body as ProxiedBody).value('input'))
  if (!checked.ok) throw new InvalidRequestError(checked.message, checked.path ?? '/')
  const fields = checked.value
  if (fields.input === undefined) throw new InvalidRequestError('body needs the field `input`', '/')
  const items = typeof fields.input === 'string' ? [{ type: 'message', role: 'user', content: fields.input }] : fields.input
  const input = readBackItems(items).input
  const session = proxySession(
    request.headers,
    typeof fields.prompt_cache_key === 'string' && fields.prompt_cache_key !== '' ? fields.prompt_cache_key : undefined
  )
  const read = readCompactRequest(
    Buffer.from(JSON.stringify({ messages: input, format: 'openai-responses', mode: 'manual', ...(session !== undefined ? { session_id: session } : {}) }))
  )
  if (!read.ok) throw new InvalidRequestError(read.message.replace(/\bmessages\b/, 'input'), read.path?.replace(/^\/messages/, '/input'))
  const abort = abortOnClose(reply)
  const started = performance.now()
  const run = await app.compaction.runProxied(read.body, { keyName: request.keyName, signal: abort.signal }).catch((err: unknown) => {
    if (err instanceof InvalidHistoryError)
      throw new InvalidRequestError(err.message.replace(/\bmessages\b/, 'input'), err.path?.replace(/^\/messages/, '/input'))
    throw err
  })
  const { response } = run
  const { recorded, begin, unkept } = await app.serve(run, {
    via: 'proxy',
    keyName: request.keyName,
    session,
    mode: 'manual',
    budgetTokens: 'off',
    log: request.log,
    started,
    endpoint: 'responses_compact',
    waitMs: performance.now() - started
  })
  if (unkept) void reply.header(RECORD_HEADER, 'not-kept')
  if (begin) reply.raw.once('close', begin)
  await recorded
  let usage = { input_tokens: 0, output_tokens: 0 }
  let item = compactionItem(input)
  if (summarized(response)) {
    usage = { input_tokens: response.summarizer.input_tokens, output_tokens: response.summarizer.output_tokens }
    item = compactionItem(response.messages)
    void reply.header('x-compaction-summary-id', response.summary.id)
  }
  void reply.header('x-compaction', summarized(response) ? 'compacted' : 'none')
  return reply
    .code(200)
    .header('content-type', 'application/json')
    .send(JSON.stringify(compactedResponse(input, item, usage, Math.floor(Date.now() / 1_000))))
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
