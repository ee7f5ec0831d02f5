import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { type CompactDeps, runCompaction } from '../../service/compact.js'
import { Type } from 'typebox'
import { CompactRequest, CompactResponse } from '../schemas.js'

const errorResponses = Object.fromEntries([400, 401, 404, 413, 422, 429, 500, 502, 503].map((s) => [s, Type.Ref('ErrorResponse')]))

export const compactRoutes: FastifyPluginAsync<{ deps: CompactDeps }> = async (app, { deps }) => {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/v1/compact',
    {
      schema: {
        tags: ['compaction'],
        summary: 'Compact a history: a summary turn plus the most recent turns, kept raw within a hard bound',
        body: CompactRequest,
        response: { 200: CompactResponse, ...errorResponses }
      }
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
