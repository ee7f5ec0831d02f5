import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { type CompactDeps, runCompaction } from '../../service/compact.js'
import { Type } from 'typebox'
import { CompactRequest, CompactResponse } from '../schemas.js'

const ERROR_MEANINGS: Record<number, string> = {
  400: 'The body breaks the schema; `error.path` points at the place.',
  401: 'No API key, or a wrong one.',
  413: 'The body is over COMPACT_BODY_LIMIT_MB.',
  422: 'The history breaks the rules of a conversation (an unanswered tool_use, a tool_result that answers nothing, roles out of turn); `error.path` points at the place.',
  429: 'Rate limited; retry after the Retry-After header.',
  500: 'An unexpected failure; details are in the server log only.',
  502: 'The model summary failed and the operator chose no fallback (COMPACT_FALLBACK=error).',
  503: 'Overloaded: too many summaries in flight; retry after the Retry-After header.'
}

const errorResponses = Object.fromEntries(Object.entries(ERROR_MEANINGS).map(([s, description]) => [s, Type.Ref('ErrorResponse', { description })]))

export const compactRoutes: FastifyPluginAsync<{ deps: CompactDeps }> = async (app, { deps }) => {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/v1/compact',
    {
      schema: {
        tags: ['compaction'],
        summary: 'Compact a history: a summary turn plus the most recent turns, kept raw within a hard bound',
        body: CompactRequest,
        response: { 200: CompactResponse, ...errorResponses }
      },
      // The response is built by the service from typed parts and checked against the contract in tests;
      // plain JSON.stringify is several times faster than a schema serializer on megabyte histories.
      serializerCompiler: () => (data) => JSON.stringify(data)
    },
    async (request, reply) => {
      const abort = new AbortController()
      request.raw.once('close', () => {
        if (!reply.sent) abort.abort()
      })
      const run = await runCompaction(request.body, deps, abort.signal)
      const { stats } = run.response
      request.log.info(
        {
          event: 'context_compacted',
          session_id: request.body.session_id,
          compacted: run.response.compacted,
          reason: run.response.reason,
          summarizer: run.response.summarizer?.kind,
          fallback_reason: run.response.summarizer?.fallback_reason ?? undefined,
          ...stats
        },
        run.response.compacted ? 'context_compacted' : 'compaction_skipped'
      )
      const t = run.timings
      void reply.header(
        'server-timing',
        `validate;dur=${t.validate.toFixed(1)}, plan;dur=${t.plan.toFixed(1)}, summarize;dur=${t.summarize.toFixed(1)}, total;dur=${(t.validate + t.plan + t.summarize).toFixed(1)}`
      )
      return run.response
    }
  )
}
