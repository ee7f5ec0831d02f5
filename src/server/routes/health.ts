import type { FastifyPluginAsync } from 'fastify'
import { Health, Ready } from '../schemas.js'

/** Liveness answers while the process does; readiness never calls the model. */
export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness: the process answers', response: { 200: Health } } }, async () => ({ status: 'ok' }))
  app.get(
    '/readyz',
    { schema: { tags: ['health'], summary: 'Readiness: the service can take compactions', response: { 200: Ready, 503: Ready } } },
    async () => ({ status: 'ready', checks: {} })
  )
}
