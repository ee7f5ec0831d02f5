import closeWithGrace from 'close-with-grace'
import { logDestination } from '../telemetry/logger.js'
import { StoreError } from '../storage/store.js'
import { SERVICE_VERSION, buildApp } from './app.js'
import { ConfigError, loadConfig, parseApiKeys, setupLine } from './config.js'
import { masterKeys } from './master-key.js'

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/

/**
 * Starts the service from the environment, as `npm start` and `compaction-gateway serve` do: a bad
 * setting or database exits 78 naming it; SIGTERM and SIGINT close gracefully (close-with-grace) and exit 0.
 */
export async function serve(): Promise<void> {
  let config
  let keys
  let master
  try {
    config = loadConfig()
    keys = parseApiKeys(config.COMPACT_API_KEYS)
    master = masterKeys(config)
    if (keys.size === 0 && !LOOPBACK.test(config.HOST) && config.COMPACT_ALLOW_NO_AUTH !== '1') {
      throw new ConfigError('HOST', `refusing to listen on ${config.HOST} without COMPACT_API_KEYS (set COMPACT_ALLOW_NO_AUTH=1 to allow it)`)
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`compaction-gateway: ${err.message}\n`)
      process.exit(78) // EX_CONFIG: a bad setting, not a crash; a supervisor should not loop on it
    }
    throw err
  }

  let app
  try {
    app = await buildApp({ config, logStream: logDestination(), masterKeys: master })
  } catch (err) {
    if (err instanceof StoreError) {
      process.stderr.write(`compaction-gateway: COMPACT_DB: ${err.message}\n`)
      process.exit(78) // a bad database is a setting to fix, not a crash to restart in a loop
    }
    throw err
  }
  // SIGTERM, SIGINT (and SIGHUP, SIGQUIT): no new connections, in-flight requests finish within the grace
  // period, exit 0; a second signal, or the period over, exits 1. An uncaught error closes the same way, exit 1.
  closeWithGrace(
    {
      delay: config.COMPACT_SHUTDOWN_GRACE_MS,
      logger: { error: (err: unknown) => app.log.error({ err }, 'error while closing') },
      onTimeout: () => app.log.error('shutdown grace period over; exiting with requests still in flight'),
      onSecondSignal: (signal: string) => app.log.error({ signal }, 'second signal while closing; exiting now'),
      onSecondError: (err: unknown) => app.log.fatal({ err }, 'second uncaught error while closing; exiting now')
    },
    async ({ signal, err }) => {
      if (err) app.log.fatal({ err }, 'uncaught error: closing, in-flight requests finish')
      else app.log.info({ signal }, 'shutting down: no new connections, in-flight compactions finish')
      await app.close()
    }
  )

  // Warm before taking traffic: the first compactions would otherwise pay for compiling the pipeline.
  await app.warm()
  const address = await app.listen({ port: config.PORT, host: config.HOST })
  app.log.info(
    { event: 'started', version: SERVICE_VERSION },
    `compaction-gateway ${SERVICE_VERSION} at ${address}: ${setupLine(config, keys.size, app.masterKeyId)}`
  )
  if (app.masterKeyId === undefined)
    app.log.warn(
      { event: 'keys_not_wrapped' },
      'session keys are kept beside the data they lock (no COMPACT_MASTER_KEY): a copy of the database opens every session; docs/operations.md says what a master key protects'
    )
}

/** Runs serve() as a process entry point. */
export function serveOrExit(): void {
  serve().catch((err: unknown) => {
    process.stderr.write(`compaction-gateway: failed to start: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  })
}
