import type { FastifyPluginAsync } from 'fastify'
import { PROBE_LOG_LEVEL } from './health.js'
import { OPEN, openResponses } from './security.js'

/** Prometheus text exposition of this app's own registry. */
export const metricsRoutes: FastifyPluginAsync = async (app) => {
  const { metrics } = app
  app.get(
    '/metrics',
    {
      logLevel: PROBE_LOG_LEVEL,
      schema: {
        tags: ['health'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics: compaction figures, summarizer calls, HTTP durations, process defaults',
        security: OPEN,
        response: {
          200: {
            description: 'Prometheus text format',
            content: { 'text/plain': { schema: { type: 'string' } } }
          },
          ...openResponses()
        }
      }
    },
    async (_request, reply) => {
      void reply.type(metrics.registry.contentType)
      return metrics.registry.metrics()
    }
  )
}
