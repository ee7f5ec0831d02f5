import type { FastifyPluginAsync } from 'fastify'
import { Health, Ready } from '../../contract/schemas.js'
import { OPEN, openResponses } from './security.js'

/** Probes and scrapes come every few seconds: their request lines are logged only at warn and above. */
export const PROBE_LOG_LEVEL = 'warn'

/** What readiness says of the session keys: whether a copy of the database alone opens its sessions (never the key or its id: the route is open). */
export function keysCheck(masterKeyId: string | undefined): string {
  return masterKeyId !== undefined ? 'wrapped under a master key' : 'not wrapped (no COMPACT_MASTER_KEY)'
}

/** Liveness answers while the process does; readiness checks the store can be written, never the model. */
export const healthRoutes: FastifyPluginAsync = async (app) => {
  const { store } = app
  const keys = keysCheck(app.masterKeyId)
  app.get(
    '/healthz',
    {
      logLevel: PROBE_LOG_LEVEL,
      schema: {
        tags: ['health'],
        operationId: 'getHealth',
        summary: 'Liveness: the process answers',
        security: OPEN,
        response: { 200: Health, ...openResponses() }
      }
    },
    async () => ({ status: 'ok' })
  )
  app.get(
    '/readyz',
    {
      logLevel: PROBE_LOG_LEVEL,
      schema: {
        tags: ['health'],
        operationId: 'getReadiness',
        summary: 'Readiness: the store can be written (the model is never called); `checks.keys` says whether the session keys are wrapped under a master key',
        security: OPEN,
        response: { 200: Ready, 503: { ...Ready, description: 'Not ready: a check failed; `checks` says which.' }, ...openResponses() }
      }
    },
    async (request, reply) => {
      try {
        await store.checkWritable()
        return { status: 'ready', checks: { store: 'ok', keys } }
      } catch (err) {
        request.log.warn({ err }, 'readiness: store not writable')
        void reply.code(503)
        // the reason stays in the log: this route is open to anyone
        return { status: 'not_ready', checks: { store: 'not writable (the server log says why)', keys } }
      }
    }
  )
}
