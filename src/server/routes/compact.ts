import type { FastifyPluginAsync, FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify'
import type { FastifyValidationResult } from 'fastify/types/schema.js'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { type CompactRunView, runCompaction } from '../../service/compact.js'
import { countCompaction, modelKindOf, recordWrites, scheduleRecord } from '../records.js'
import { DEFAULT_BODY_LIMIT, bodyParser } from '../body.js'
import { CompactRequest, type CompactRequestBody, CompactResponse } from '../../contract/schemas.js'
import { KEYED, UNAUTHORIZED_DESCRIPTION } from './security.js'
import { GatewayError } from '../../contract/errors.js'
import { parseJsonBody } from '../json.js'
import { jsonBytes } from '../../contract/wire.js'
import { compactRequestValidator } from '../../contract/validation.js'
import { FORMATS } from '../../formats/index.js'

/** The request schema's check, passing a raw body through for its worker to check. */
function rawOrValidated(): FastifyValidationResult {
  const validator = compactRequestValidator()
  const check = ((data: unknown): boolean => {
    if (data instanceof RawBody) return true
    const ok = validator.check(data)
    check.errors = ok ? null : (validator.errors() as unknown as FastifySchemaValidationError[])
    return ok
  }) as FastifyValidationResult
  return check
}

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

/** The history's format as the body names it ('anthropic' where it names none; 'unknown' where it names another). */
function formatOf(body: unknown): string {
  const format = (body as { format?: unknown } | undefined)?.format
  if (format === undefined || body instanceof RawBody) return 'anthropic'
  return typeof format === 'string' && (FORMATS as readonly string[]).includes(format) ? format : 'unknown'
}

function modeOf(request: FastifyRequest): string {
  const mode = (request.body as { mode?: unknown } | undefined)?.mode
  return mode === 'manual' || mode === 'auto' ? mode : mode === undefined && request.body ? 'auto' : 'unknown'
}

/** A body handed to a worker as it came: its bytes, unparsed. */
class RawBody {
  constructor(readonly bytes: Buffer) {}
}

export interface CompactRouteOptions {
  /** Bodies of this many bytes or more go to the compaction workers, where there are (no model summarizer is configured). */
  workerMinBytes?: number
}

export const compactRoutes: FastifyPluginAsync<CompactRouteOptions> = async (app, { workerMinBytes = 0 }) => {
  const { writes, store, metrics } = app
  const { deps, pool } = app.compaction
  if (pool) {
    // In this plugin only: a large body is not parsed here at all; its bytes go to a worker.
    app.removeContentTypeParser('application/json')
    const bodyLimit = app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT
    app.addContentTypeParser(
      'application/json',
      bodyParser<unknown>(bodyLimit, (bytes) => (bytes.length >= workerMinBytes ? { value: new RawBody(bytes) } : parseJsonBody(bytes)))
    )
  }
  const reasons = new WeakMap<FastifyRequest, string>()
  // a body a worker parsed: its mode and format as the worker read them
  const read = new WeakMap<FastifyRequest, { mode: string; format: string }>()
  app.addHook('onResponse', async (request, reply) => {
    if (request.routeOptions.url !== '/v1/compact') return
    const outcome = reasons.get(request) ?? outcomeOfStatus(reply.statusCode)
    const labels = read.get(request) ?? { mode: modeOf(request), format: formatOf(request.body) }
    metrics.requests.inc({ ...labels, outcome })
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
      // The service's own check (the contract's schema, and each message per `format`); with workers, a body
      // left unparsed is validated in its worker, by the same schema and words.
      validatorCompiler: rawOrValidated
    },
    async (request, reply) => {
      const started = performance.now()
      const raw = request.body as unknown
      if (raw instanceof RawBody && pool) {
        // Parsing, validation, the plan, the summary and serialization all happen in a worker.
        const result = await pool.run({ defaults: deps.defaults, tenant: request.keyName, coldLayer: deps.coldLayer === true }, raw.bytes)
        if (!result.ok) throw new GatewayError(result.kind, result.message, result.path !== undefined ? { path: result.path } : {})
        read.set(request, { mode: result.body.mode ?? 'auto', format: result.body.format ?? 'anthropic' })
        await afterCompaction(request, reply, result.run, result.body, started)
        // already serialized and encoded in the worker: its bytes are sent as they are
        return sendJson(reply, result.json)
      }
      // A client that hangs up signals it here; a model summary goes on all the same, because the cache
      // shares the call and the client's retry then pays for no second one. (The request stream's own
      // 'close' fires as soon as the body is read, so the response's is the one to watch.)
      const abort = new AbortController()
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) abort.abort()
      })
      const run = await runCompaction(request.body, deps, { tenant: request.keyName, signal: abort.signal })
      await afterCompaction(request, reply, run, request.body, started)
      return sendJson(reply, jsonBytes(run.response))
    }
  )

  /**
   * A response's JSON sent as UTF-8 bytes, not as a string: Node encodes a string in its socket write, about
   * 2 ms for a 110 KB answer, where the bytes are written message by message (jsonBytes) for a fifth of that.
   */
  function sendJson(reply: FastifyReply, json: Uint8Array): FastifyReply {
    return reply.type('application/json; charset=utf-8').send(Buffer.from(json.buffer, json.byteOffset, json.byteLength) as never)
  }

  /** What follows every compaction, wherever it ran: the counts, the record, the log event, Server-Timing. */
  async function afterCompaction(
    request: FastifyRequest,
    reply: FastifyReply,
    run: CompactRunView,
    body: Pick<CompactRequestBody, 'mode' | 'session_id' | 'budget_tokens'>,
    started: number
  ): Promise<void> {
    const { response } = run
    reasons.set(request, response.reason)
    countCompaction(metrics, run, modelKindOf(deps.model?.kind))
    if (response.compacted) {
      // The record is written before the answer; the cold layer once the answer has gone (or its client
      // has), reads of it in this process waiting for the write (WritesAfterAnswers). With PostgreSQL,
      // which other replicas read, the answer waits for both.
      const budget = body.budget_tokens ?? deps.defaults.budgetTokens
      const keep = recordWrites(store, metrics, request.log, { ...body, budget }, request.keyName, response, run.memory)
      const { recorded, begin } = await scheduleRecord(store, writes, request.keyName, body.session_id, keep)
      if (begin) {
        reply.raw.once('finish', begin)
        reply.raw.once('close', begin)
      }
      await recorded
    }
    const fault = response.summarizer?.fallback_reason
    if (fault && fault !== 'no_api_key') {
      // The compaction was answered, but an operator must see that the model is failing.
      request.log.warn(
        { event: 'summarizer_fault', reason: fault, key_name: request.keyName || undefined, session_id: body.session_id, summarizer_calls: response.summarizer?.calls },
        `model summary failed (${fault}); the extractive summary stood in`
      )
    }
    // One event per compaction, with its figures and never its content.
    request.log.info(
      {
        event: response.compacted ? 'context_compacted' : 'compaction_skipped',
        session_id: body.session_id,
        key_name: request.keyName || undefined,
        mode: body.mode ?? 'auto',
        reason: response.reason,
        summary_id: response.compacted ? response.summary.id : undefined,
        summarizer: response.summarizer?.kind,
        model: response.summarizer?.model ?? undefined,
        fallback_reason: response.summarizer?.fallback_reason ?? undefined,
        summarizer_calls: response.summarizer?.calls,
        duration_ms: Math.round(performance.now() - started),
        ...response.stats
      },
      response.compacted ? 'context_compacted' : 'compaction_skipped'
    )
    const t = run.timings
    void reply.header(
      'server-timing',
      `validate;dur=${t.validate.toFixed(1)}, plan;dur=${t.plan.toFixed(1)}, summarize;dur=${t.summarize.toFixed(1)}, total;dur=${(t.validate + t.plan + t.summarize).toFixed(1)}`
    )
  }
}
