import { type Readable, Transform } from 'node:stream'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { ProxyCompactor, ProxyOutcome } from '../../proxy/compactor.js'
import { farUnderBudget, proxyBudget, proxySession, readMessagesRequest } from '../../proxy/request.js'
import { type Upstream, clientHeaders, upstreamHeaders } from '../../proxy/upstream.js'
import { withMessages } from '../../contract/wire.js'
import { InvalidHistoryError } from '../../service/errors.js'
import type { Store } from '../../storage/store.js'
import type { Metrics } from '../../telemetry/metrics.js'
import { ApiError, errorBody } from '../errors.js'
import { DEFAULT_BODY_LIMIT, bodyParser } from '../body.js'
import { parseJsonBody } from '../json.js'
import { addToRequestLine } from '../../telemetry/logger.js'
import { countCompaction, modelKindOf, recordWrites, scheduleRecord } from '../records.js'
import { KEYED, keyedResponses } from './security.js'

/** A proxied body: its bytes as they came (forwarded as they are when nothing is compacted), read only when needed. */
class ProxiedBody {
  private parsed: unknown
  constructor(readonly bytes: Buffer) {}

  /** Its JSON, parsed once, or the 400 that says why it is not. */
  value(): unknown {
    if (this.parsed === undefined) {
      const parsed = parseJsonBody(this.bytes)
      if (parsed.error) throw parsed.error
      this.parsed = parsed.value
    }
    return this.parsed
  }
}

export interface MessagesRouteOptions {
  upstream: Upstream
  compactor: ProxyCompactor
  metrics: Metrics
  store?: Store
  /** COMPACT_BUDGET: the prompt size from which a proxied request is compacted. */
  budget: number | 'off'
  /**
   * The credentials a request is forwarded with: the gateway's own key, or (only when the gateway checks
   * no keys of its own and has none for the upstream) the client's; undefined when there are none.
   */
  credentials: (request: FastifyRequest) => Record<string, string> | undefined
}

const NO_RETRY = { 'x-should-retry': 'false' }

/** The proxied endpoints: the same path upstream as here. */
const ENDPOINTS = [
  {
    endpoint: 'messages',
    path: '/v1/messages',
    operationId: 'createMessage',
    summary: 'The Messages API, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives',
    answer: 'The message'
  },
  {
    endpoint: 'count_tokens',
    path: '/v1/messages/count_tokens',
    operationId: 'countMessageTokens',
    summary: 'The Messages API token count, proxied: it counts what /v1/messages would send (compacted past the budget)',
    answer: 'The count'
  }
] as const
type Route = (typeof ENDPOINTS)[number]

/** The Messages API's request, described for the contract; the upstream checks it whole. */
const MessagesRequest = Type.Object(
  {
    model: Type.String(),
    messages: Type.Array(Type.Object({ role: Type.Union([Type.Literal('user'), Type.Literal('assistant'), Type.Literal('system')]), content: Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.String() }))]) })),
    system: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.String() }))])),
    tools: Type.Optional(Type.Array(Type.Object({}))),
    max_tokens: Type.Optional(Type.Integer()),
    stream: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Type.Object({ user_id: Type.Optional(Type.String({ description: 'Names the session when x-compaction-session is absent.' })) }))
  },
  { additionalProperties: true, description: 'A Messages API request, as the Anthropic SDKs send it. Every field passes to the upstream unchanged, but for `messages` when they are compacted.' }
)

const PROXY_HEADERS = Type.Object({
  'x-compaction-budget': Type.Optional(Type.String({ description: 'The prompt size (tokens) past which this request is compacted, or "off"; COMPACT_BUDGET by default.' })),
  'x-compaction-session': Type.Optional(
    Type.String({ description: 'The session (1 to 200 characters); by default the session id the agent sends (x-claude-code-session-id, x-session-id, x-session-affinity), else metadata.user_id.' })
  )
})

const upstreamAnswer = (what: string) => ({
  description: `${what}, as the Messages API gave it (status, headers and body; \`text/event-stream\` for \`stream: true\`), with \`x-compaction: none|compacted\` and \`x-compaction-summary-id\`.`,
  content: { 'application/json': { schema: Type.Object({}, { additionalProperties: true }) }, 'text/event-stream': { schema: Type.String() } }
})

const gatewayErrors = () => ({
  ...keyedResponses(),
  400: Type.Ref('ErrorResponse', { description: 'The body is not a Messages API request the gateway can estimate, or an over-budget history breaks the rules of a conversation; `error.path` names the place.' }),
  413: Type.Ref('ErrorResponse', { description: 'The body is over COMPACT_BODY_LIMIT_MB.' }),
  502: Type.Ref('ErrorResponse', { description: 'The Messages API could not be reached (or the model summary failed and COMPACT_FALLBACK=error).' }),
  504: Type.Ref('ErrorResponse', { description: 'The Messages API did not begin to answer within COMPACT_UPSTREAM_TIMEOUT_MS.' }),
  '4XX': Type.Ref('ErrorResponse', { description: "The Messages API's own refusals come back with their status, body and headers." }),
  '5XX': Type.Ref('ErrorResponse', { description: "The Messages API's own failures (500, 529 overloaded…) come back with their status, body and retry-after." })
})

/** The end of the last complete event in `bytes` (after its blank line), or -1. */
function lastEventEnd(bytes: Buffer): number {
  const lf = bytes.lastIndexOf('\n\n')
  const crlf = bytes.lastIndexOf('\r\n\r\n')
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 4)
}

/**
 * An event stream relayed event by event: bytes go on at each event's blank line, so that when the
 * upstream breaks off the gateway's error event follows a whole event (the part of one that came is
 * dropped), and an SDK client reads the error instead of a cut JSON.
 */
function withErrorEvent(body: Readable, aborted: () => boolean): Readable {
  let held: Buffer = Buffer.alloc(0)
  const relay = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const bytes = held.length > 0 ? Buffer.concat([held, chunk]) : chunk
      const end = lastEventEnd(bytes)
      if (end < 0) {
        held = bytes
        return done()
      }
      held = bytes.subarray(end)
      done(null, bytes.subarray(0, end))
    },
    flush(done) {
      done(null, held.length > 0 ? held : undefined)
    }
  })
  body.on('error', (err) => {
    body.unpipe(relay)
    held = Buffer.alloc(0) // the part of an event that came is dropped
    if (aborted()) return void relay.end()
    const event = errorBody('api_error', `the Messages API stream broke off: ${err.message}`)
    relay.end(Buffer.from(`event: error\ndata: ${JSON.stringify(event)}\n\n`))
  })
  body.pipe(relay)
  return relay
}

/**
 * POST /v1/messages and /v1/messages/count_tokens: the Messages API, proxied. A request over its budget
 * has its messages compacted (the pipeline, doctrine, summarizer, records and cold layer of /v1/compact);
 * one under it is forwarded byte for byte. The answer streams back as it arrives.
 */
export const messagesRoutes: FastifyPluginAsync<MessagesRouteOptions> = async (app, options) => {
  const { upstream, compactor, metrics, store } = options
  const { writes } = app
  // In this plugin only: the body's bytes are kept, so that they can be forwarded unchanged, and read only
  // when the request may be compacted.
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', bodyParser(app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT, (bytes) => ({ value: new ProxiedBody(bytes) })))

  const outcomes = new WeakMap<FastifyRequest, ProxyOutcome['kind']>()
  app.addHook('onResponse', (request, reply, done) => {
    const endpoint = ENDPOINTS.find((e) => e.path === request.routeOptions.url)?.endpoint ?? 'messages'
    metrics.proxyRequests.inc({ endpoint, compaction: outcomes.get(request) ?? 'none', status: `${Math.floor(reply.statusCode / 100)}xx` })
    done()
  })
  // An answer relayed from the model may be silent for as long as the upstream may be (undici's body
  // timeout bounds that); the client may not: when the idle timeout finds bytes waiting for a client that
  // does not read them, its connection is dropped, and with it the upstream's answer.
  app.addHook('onSend', (request, reply, payload, done) => {
    const socket = request.raw.socket as { writableLength?: number; destroy?: () => void } | undefined
    reply.raw.on('timeout', () => {
      if (socket?.writableLength) socket.destroy?.()
    })
    done(null, payload)
  })

  async function proxy({ endpoint, path }: Route, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const started = performance.now()
    const body = request.body as ProxiedBody
    const budget = proxyBudget(request.headers['x-compaction-budget'], options.budget)
    const credentials = options.credentials(request)
    // a setting to fix, not a fault a retry could outlast: the SDKs are told not to retry it
    if (!credentials) throw new ApiError(500, 'api_error', 'the gateway has no key for the Messages API: set ANTHROPIC_API_KEY on the gateway', undefined, NO_RETRY)

    const abort = new AbortController()
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) abort.abort()
    })
    // A body whose bytes alone are far under the budget is forwarded unread: nothing could be done to it.
    const unread = budget !== 'off' && farUnderBudget(body.bytes, budget * compactor.quietShare)
    const parts = unread ? undefined : readMessagesRequest(body.value())
    const session = parts ? proxySession(request.headers, parts.userId) : undefined
    let outcome: ProxyOutcome
    try {
      outcome = parts ? await compactor.prepare({ ...parts, tenant: request.keyName, session, budget, signal: abort.signal }) : { kind: 'none', tokens: undefined }
    } catch (err) {
      // In the Messages API every refusal of a request's content is a 400.
      if (err instanceof InvalidHistoryError) throw new ApiError(400, 'invalid_request_error', err.message, err.path)
      throw err
    }
    outcomes.set(request, outcome.kind)
    // The record and the cold layer never hold the forward: they are written while the model works on the
    // forwarded request, and the answer waits for the record. With SQLite, whose indexing holds this thread,
    // the cold layer begins once the request is on its way, reads of the session waiting for it
    // (WritesAfterAnswers); with a store other replicas read, the answer waits for it too.
    let recorded: Promise<void> | undefined
    let begin: (() => void) | undefined
    if (outcome.kind === 'compacted') {
      const { run } = outcome
      countCompaction(metrics, run, modelKindOf(app.compaction.deps.model?.kind))
      metrics.proxyCompactions.inc({ source: outcome.source })
      if (store) {
        const keep = recordWrites(store, metrics, request.log, { mode: 'auto', session_id: session, budget }, request.keyName, run.response, outcome.memory)
        ;({ recorded, begin } = await scheduleRecord(store, writes, request.keyName, session, keep))
        if (begin) reply.raw.once('close', begin)
      }
      request.log.info(
        { event: 'context_compacted', via: 'proxy', source: outcome.source, session_id: session, key_name: request.keyName || undefined, summary_id: outcome.summaryId, summarizer: run.response.summarizer.kind, ...run.response.stats },
        'context_compacted'
      )
    }
    const payload = outcome.kind === 'none' ? body.bytes : withMessages(body.value() as object, outcome.messages)
    const asked = performance.now()
    // The query string goes on as it came (Claude Code's `?beta=true`).
    const query = request.url.indexOf('?')
    const sending = upstream.send(query < 0 ? path : `${path}${request.url.slice(query)}`, upstreamHeaders(request.headers, credentials), payload, abort.signal)
    if (begin) setImmediate(begin)
    const res = await sending
    const upstreamMs = performance.now() - asked
    await recorded // the record's writes log and count their own failures: they never reject
    metrics.proxyUpstreamSeconds.observe({ endpoint }, upstreamMs / 1_000)
    // On the request's one line, written when the answer ends (a line of its own cost a write a request).
    addToRequestLine(request, {
      event: 'proxied',
      endpoint,
      status: res.status,
      compaction: outcome.kind,
      summary_id: outcome.kind === 'none' ? undefined : outcome.summaryId,
      estimated_tokens: outcome.tokens,
      session_id: session,
      prepare_ms: Math.round(asked - started),
      upstream_ms: Math.round(upstreamMs)
    })
    void reply.code(res.status).headers(clientHeaders(res.headers))
    void reply.header('x-compaction', outcome.kind === 'none' ? 'none' : 'compacted')
    if (outcome.kind !== 'none') void reply.header('x-compaction-summary-id', outcome.summaryId)
    const contentType = res.headers['content-type']
    const stream = typeof contentType === 'string' && contentType.startsWith('text/event-stream')
    return reply.send(stream ? withErrorEvent(res.body, () => abort.signal.aborted) : res.body)
  }

  // The body is read here, not by a schema: the contract describes it, the upstream checks it.
  for (const route of ENDPOINTS) {
    app.post(
      route.path,
      {
        schema: {
          tags: ['proxy'],
          operationId: route.operationId,
          summary: route.summary,
          security: KEYED,
          headers: PROXY_HEADERS,
          body: MessagesRequest,
          response: { 200: upstreamAnswer(route.answer), ...gatewayErrors() }
        },
        validatorCompiler: () => () => true
      },
      async (request, reply) => proxy(route, request, reply)
    )
  }
}
