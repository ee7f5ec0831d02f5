import type { FastifyPluginAsync, FastifyReply } from 'fastify'
import { checkedWhenRead } from '../json.js'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { type CompactionInput, type PhaseTimings, compactionInput } from '../../service/compact.js'
import { RECORD_HEADER, type Scheduled } from '../../service/served.js'
import { bodyParser } from '../body.js'
import { abortOnClose } from '../proxy/forward.js'
import { DEFAULT_BODY_LIMIT } from '../../contract/defaults.js'
import { CompactRequest, CompactResponse } from '../../contract/schemas.js'
import { KEYED, UNAUTHORIZED_DESCRIPTION } from './security.js'
import { InvalidRequestError } from '../../contract/errors.js'
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
  const compactions = app.compaction.service
  // One reading of a body, inline or in a worker (readCompactRequest): a large one's bytes go to a worker
  // unparsed, where there are workers; any other is read here.
  app.decorateRequest('compactCount', null)
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser(
    'application/json',
    bodyParser<unknown>(app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT, (bytes, request) => {
      if (compactions.readsInWorker(bytes.length)) return { value: new RawBody(bytes) }
      const read = readCompactRequest(bytes)
      if (read.ok) return { value: compactionInput(read.body) }
      if (read.value !== undefined) request.compactCount = labelsOf(read.value)
      return { error: new InvalidRequestError(read.message, read.path) }
    })
  )
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
      const body = request.body as unknown
      const ask = body instanceof RawBody ? { bytes: body.bytes } : { input: body as CompactionInput }
      // A client that hangs up signals it here; a model summary goes on all the same, because the cache shares the
      // call and the client's retry then pays for no second one.
      const who = { keyName: request.keyName, log: request.log, started: performance.now(), signal: abortOnClose(reply).signal }
      const { json, run, as, scheduled } = await compactions.compact(ask, who)
      request.compactCount = { ...labelsOf(as), outcome: run.response.reason }
      await answered(reply, scheduled)
      void reply.header('server-timing', serverTiming(run.timings))
      return reply.type('application/json; charset=utf-8').send(Buffer.from(json.buffer, json.byteOffset, json.byteLength) as never)
    }
  )
}

/** The answer's part of a compaction's record: a record not kept said in a header, the writes begun once it has gone, the record waited for where it must be. */
async function answered(reply: FastifyReply, { recorded, begin, unkept }: Scheduled): Promise<void> {
  if (unkept) void reply.header(RECORD_HEADER, 'not-kept')
  if (begin) {
    reply.raw.once('finish', begin)
    reply.raw.once('close', begin)
  }
  await recorded
}

/** The phases' times, for the Server-Timing header. */
function serverTiming(t: PhaseTimings): string {
  return `validate;dur=${t.validate.toFixed(1)}, plan;dur=${t.plan.toFixed(1)}, summarize;dur=${t.summarize.toFixed(1)}, total;dur=${(t.validate + t.plan + t.summarize).toFixed(1)}`
}
