import type { FastifyPluginAsync } from 'fastify'
import type { Store } from '../../storage/store.js'
import { Health, Ready } from '../schemas.js'

/** Liveness answers while the process does; readiness checks the store can be written, never the model. */
export const healthRoutes: FastifyPluginAsync<{ store: Store }> = async (app, { store }) => {
  app.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness: the process answers', response: { 200: Health } } }, async () => ({ status: 'ok' }))
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        summary: 'Readiness: the store can be written (the model is never called)',
        response: { 200: Ready, 503: { ...Ready, description: 'Not ready: a check failed; `checks` says which.' } }
      }
    },
    async (request, reply) => {
      try {
        store.checkWritable()
        return { status: 'ready', checks: { store: 'ok' } }
      } catch (err) {
        request.log.warn({ err }, 'readiness: store not writable')
        void reply.code(503)
        return { status: 'not_ready', checks: { store: `not writable: ${err instanceof Error ? err.message : String(err)}` } }
      }
    }
  )
}
