import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { checkedWhenRead } from '../json.js'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { type CompactRunView, runCompaction } from '../../service/compact.js'
import { RECORD_HEADER } from '../../service/served.js'
import { bodyParser } from '../body.js'
import { DEFAULT_BODY_LIMIT } from '../../contract/defaults.js'
import { CompactRequest, type CompactRequestBody, CompactResponse } from '../../contract/schemas.js'
import { KEYED, UNAUTHORIZED_DESCRIPTION } from './security.js'
import { GatewayError, InvalidRequestError } from '../../contract/errors.js'
import { jsonBytes } from '../../contract/wire.js'
import { readCompactRequest } from '../../contract/validation.js'
import { FORMATS } from '../../formats/index.js'

const ERROR_MEANINGS: Record<number, string> = {
  400: 'The body breaks the schema; `error.path` points at the place.',
  401: UNAUTHORIZED_DESCRIPTION,
  413: 'The body is over COMPACT_BODY_LIMIT_MB.',
  415: 'The body is not JSON, or is sent with a Content-Encoding.',
  422: 'The history breaks the rules of a conversation (an unanswered tool_use, a tool_result that answers nothing, roles out of turn), or its newest step cannot fit the budget even clipped; `error.path` points at the place.',
  429: 'Rate limited (per key, or per address after failed authentications); retry after the Retry-After header.',
  500: 'An unexpected failure; details are in the server log only.',
  502: 'The model summary failed and the operator chose no fallback (COMPACT_FALLBACK=error).',
  503: 'Overloaded: too many summaries in flight; retry after the Retry-After header.'
}

const errorResponses = Object.fromEntries(Object.entries(ERROR_MEANINGS).map(([s, description]) => [s, Type.Ref('ErrorResponse', { description })]))

/** What a request that produced no compaction came to, by its status: overload and limits apart from faults. */
function outcomeOfStatus(status: number): string {
  if (status === 499) return 'cancelled'
  if (status === 503) return 'overloaded'
  if (status === 429) return 'rate_limited'
  if (status === 502) return 'summarizer_failed'
  return status < 500 ? 'rejected' : 'failed'
}

/** A request's metric labels, as its body names them: its mode ('auto' where it names none) and its history's format ('anthropic' where it names none); 'unknown' where it names another, or is none. */
function labelsOf(body: unknown): { mode: string; format: string } {
  if (typeof body !== 'object' || body === null || body instanceof RawBody) return { mode: body instanceof RawBody ? 'auto' : 'unknown', format: 'anthropic' }
  const { mode, format } = body as { mode?: unknown; format?: unknown }
  return {
    mode: mode === undefined ? 'auto' : mode === 'manual' || mode === 'auto' ? mode : 'unknown',
    format: format === undefined ? 'anthropic' : typeof format === 'string' && (FORMATS as readonly string[]).includes(format) ? format : 'unknown'
  }
}

/** What a compaction's body said of itself: what is counted, recorded and logged. */
type CompactedBody = Pick<CompactRequestBody, 'mode' | 'session_id' | 'budget_tokens' | 'format'>

/** A body handed to a worker as it came: its bytes, unparsed. */
class RawBody {
  constructor(readonly bytes: Buffer) {}
}

declare module 'fastify' {
  interface FastifyRequest {
    /** What a /v1/compact request is counted as (its body's mode and format, and its outcome once compacted); null until its body is read. */
    compactCount: { mode: string; format: string; outcome?: string } | null
  }
}

export const compactRoutes: FastifyPluginAsync = async (app) => {
  const { metrics } = app
  const { deps, pool, workerMinBytes, runRaw } = app.compaction
  // One reading of a body, inline or in a worker (readCompactRequest): a large one's bytes go to a worker
  // unparsed, where there are workers; any other is read here.
  app.decorateRequest('compactCount', null)
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser(
    'application/json',
    bodyParser<unknown>(app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT, (bytes, request) => {
      if (pool && bytes.length >= workerMinBytes) return { value: new RawBody(bytes) }
      const read = readCompactRequest(bytes)
      if (read.ok) return { value: read.body }
      if (read.value !== undefined) request.compactCount = labelsOf(read.value)
      return { error: new InvalidRequestError(read.message, read.path) }
    })
  )
  /**
   * One compaction, wherever it runs: a body left as bytes goes to a worker, which parses, checks,
   * compacts and serializes it there; a body read here is compacted here. Either way the answer's bytes,
   * the run to count and record, and what the body said of itself.
   */
  const compact = async (body: unknown, keyName: string, signal: AbortSignal): Promise<{ json: Uint8Array; run: CompactRunView; body: CompactedBody }> => {
    if (body instanceof RawBody) {
      const result = await runRaw(body.bytes, keyName, signal)
      if (!result.ok) throw new GatewayError(result.kind, result.message, result.path !== undefined ? { path: result.path } : {})
      return result
    }
    const checked = body as CompactRequestBody
    const run = await runCompaction(checked, deps, { keyName, signal })
    return { json: jsonBytes(run.response), run, body: checked }
  }
  app.addHook('onResponse', async (request, reply) => {
    if (request.routeOptions.url !== '/v1/compact') return
    const counted: { mode: string; format: string; outcome?: string } = request.compactCount ?? labelsOf(request.body)
    metrics.requests.inc({ mode: counted.mode, format: counted.format, outcome: counted.outcome ?? outcomeOfStatus(reply.statusCode) })
  })

  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/v1/compact',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'compact',
        summary: 'Compact a history: a summary turn plus the most recent turns, kept raw within a hard bound',
        security: KEYED,
        body: CompactRequest,
        response: { 200: CompactResponse, ...errorResponses }
      },
      // A compaction is sent as the bytes jsonBytes writes (sendJson); what else this route answers (its
      // errors) is built from typed parts, checked against the contract in tests, and needs no schema serializer.
      serializerCompiler: () => (data) => JSON.stringify(data),
      // The body was checked as it was read (readCompactRequest), here or, left unparsed, in its worker.
      validatorCompiler: checkedWhenRead
    },
    async (request, reply) => {
      const started = performance.now()
      // A client that hangs up signals it here; a model summary goes on all the same, because the cache
      // shares the call and the client's retry then pays for no second one. (The request stream's own
      // 'close' fires as soon as the body is read, so the response's is the one to watch.)
      const abort = new AbortController()
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) abort.abort()
      })
      const done = await compact(request.body, request.keyName, abort.signal)
      request.compactCount = labelsOf(done.body)
      await afterCompaction(request, reply, done.run, done.body, started)
      return sendJson(reply, done.json)
    }
  )

  /**
   * A response's JSON sent as UTF-8 bytes, not as a string: Node would encode a string in its socket write,
   * where the bytes are written message by message (jsonBytes) for much less.
   */
  function sendJson(reply: FastifyReply, json: Uint8Array): FastifyReply {
    return reply.type('application/json; charset=utf-8').send(Buffer.from(json.buffer, json.byteOffset, json.byteLength) as never)
  }

  /** What follows every compaction, wherever it ran: served (service/served.ts), then the answer's headers. */
  async function afterCompaction(request: FastifyRequest, reply: FastifyReply, run: CompactRunView, body: CompactedBody, started: number): Promise<void> {
    request.compactCount = { ...(request.compactCount ?? labelsOf(body)), outcome: run.response.reason }
    const { recorded, begin, unkept } = await app.serve(run, {
      via: 'route',
      keyName: request.keyName,
      session: body.session_id,
      mode: body.mode ?? 'auto',
      budgetTokens: body.budget_tokens ?? deps.defaults.budgetTokens,
      log: request.log,
      started
    })
    if (unkept) void reply.header(RECORD_HEADER, 'not-kept')
    if (begin) {
      reply.raw.once('finish', begin)
      reply.raw.once('close', begin)
    }
    await recorded
    const t = run.timings
    void reply.header(
      'server-timing',
      `validate;dur=${t.validate.toFixed(1)}, plan;dur=${t.plan.toFixed(1)}, summarize;dur=${t.summarize.toFixed(1)}, total;dur=${(t.validate + t.plan + t.summarize).toFixed(1)}`
    )
  }
}
