import fp from 'fastify-plugin'
import { type SharedState, connectRedis } from '../../storage/redis.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Redis shared by the replicas, when COMPACT_REDIS_URL is set. */
    redis: SharedState | undefined
  }
}

/** Redis for what the replicas share; it going away is logged once, and its coming back once. */
export const sharedStatePlugin = fp<{ url: string | undefined }>(
  async (app, { url }) => {
    const redis = url
      ? connectRedis(url, {
          onDown: (err) => app.log.error({ err, event: 'redis_down' }, 'Redis is unavailable: rate limits and summaries in flight are per replica until it is back'),
          onUp: () => app.log.info({ event: 'redis_up' }, 'Redis is back: rate limits and summaries in flight are shared again')
        })
      : undefined
    app.decorate('redis', redis)
    app.addHook('onClose', async () => redis?.close())
  },
  { name: 'shared-state' }
)
