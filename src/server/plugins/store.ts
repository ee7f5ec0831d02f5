import fp from 'fastify-plugin'
import { isPostgresUrl } from '../../storage/common.js'
import { SqliteStore } from '../../storage/sqlite.js'
import { ReadYourWrites } from '../../storage/read-your-writes.js'
import { Activity } from '../../service/activity.js'
import { PRUNE_INTERVAL_MS } from '../../contract/defaults.js'
import { type KeyMaterial, KeyRing } from '../../storage/keyring.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Records, the summary cache and the cold layer; a session's reads wait for its writes begun after their answers. */
    store: ReadYourWrites
    /** What the gateway did for each tenant, tallied by the hour (the overview, a session's cost). */
    activity: Activity
    /** Resolves when the prune under way (at start, then hourly) is done; at once where none is. */
    pruned: () => Promise<void>
    /** The id of the master key the session keys are wrapped under; undefined where none is given. */
    masterKeyId: string | undefined
  }
}

export interface StorePluginOptions {
  /** COMPACT_DB: a SQLite file, or a postgres:// URL. */
  db: string
  /** A store made by the caller instead (tests); the app closes it all the same. */
  store?: import('../../storage/store.js').Store
  retentionDays: number
  /** COMPACT_MEMORY_SESSION_MB in bytes: most text one session's cold layer keeps. */
  sessionBytes?: number
  /** The master keys the session keys are wrapped under (COMPACT_MASTER_KEY…). */
  keys?: KeyMaterial
  now: () => number
}

/**
 * The store, opened first (a SQLite file that cannot be opened stops the start, naming it; PostgreSQL's
 * faults are logged and counted, never fatal), pruned from the start (not awaited) and hourly, closed last (after the writes
 * begun after their answers).
 */
export const storePlugin = fp<StorePluginOptions>(
  async (app, { db, store: given, retentionDays, sessionBytes, keys = {}, now }) => {
    const { metrics } = app
    async function postgres(url: string): Promise<import('../../storage/store.js').Store> {
      // PostgreSQL's module (and its driver) loaded only where it is used: a start on SQLite does not pay for it
      const { PostgresStore } = await import('../../storage/postgres.js')
      return new PostgresStore(url, {
        ...(sessionBytes !== undefined ? { maxSessionBytes: sessionBytes } : {}),
        keys,
        onPoolError: (err) => {
          metrics.storeErrors.inc({ operation: 'connection' })
          app.log.error({ err, event: 'store_connection_lost' }, 'a PostgreSQL connection failed; the pool reconnects')
        }
      })
    }
    const opened =
      given ??
      (isPostgresUrl(db) ? await postgres(db) : new SqliteStore(db, { ...(sessionBytes !== undefined ? { maxSessionBytes: sessionBytes } : {}), keys }))
    app.decorate('masterKeyId', new KeyRing(keys).id)
    const store = new ReadYourWrites(opened)
    app.decorate('store', store)
    const activity = new Activity(
      store,
      (err) => {
        metrics.storeErrors.inc({ operation: 'activity' })
        app.log.error({ err, event: 'activity_not_kept' }, 'tallies of what the gateway did could not be kept')
      },
      now
    )
    app.decorate('activity', activity)
    let pruning: Promise<void> | undefined
    const prune = async (): Promise<void> => {
      try {
        const pruned = await store.prune(now() - retentionDays * 86_400_000, now())
        if (pruned.records + pruned.cache + pruned.memory > 0) app.log.info({ event: 'store_pruned', ...pruned }, 'store_pruned')
      } catch (err) {
        metrics.storeErrors.inc({ operation: 'prune' })
        app.log.error({ err }, 'store prune failed')
      }
    }
    // One at a time, in slices the store sizes (its writes come between them), and never awaited by the
    // start: a store with a day to prune is ready at once.
    const start = (): void => {
      pruning ??= prune().finally(() => (pruning = undefined))
    }
    app.decorate('pruned', async () => pruning)
    const timer = setInterval(start, PRUNE_INTERVAL_MS)
    timer.unref()
    app.addHook('onReady', async () => start())
    app.addHook('onClose', async () => {
      clearInterval(timer)
      await pruning
      // the writes begun after their answers first (store.close drains them), then the tallies
      await store.drain()
      await activity.close()
      await store.close()
    })
  },
  { name: 'store', dependencies: ['metrics'] }
)
