import fp from 'fastify-plugin'
import { type SharedState, connectRedis } from '../../storage/redis.js'

/** Longest a start waits for Redis's first answer (its connect timeout, and a little). */
const REDIS_FIRST_CONNECT_MS = 2_500

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
      ? await connectRedis(url, {
          onDown: (err) =>
            app.log.error({ err, event: 'redis_down' }, 'Redis is unavailable: rate limits and summaries in flight are per replica until it is back'),
          onUp: () => app.log.info({ event: 'redis_up' }, 'Redis is back: rate limits and summaries in flight are shared again')
        })
      : undefined
    app.decorate('redis', redis)
    // Ready once Redis answers or its first try fails (at most its connect timeout): a replica that served
    // before it could see Redis would count its first requests' rate alone.
    app.addHook('onReady', async () => {
      const client = redis?.redis
      if (!client || client.status === 'ready') return
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer)
          client.off('ready', done).off('error', done).off('end', done)
          resolve()
        }
        const timer = setTimeout(done, REDIS_FIRST_CONNECT_MS)
        client.once('ready', done).once('error', done).once('end', done)
      })
    })
    app.addHook('onClose', async () => redis?.close())
  },
  { name: 'shared-state' }
)
