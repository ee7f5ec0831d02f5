import { logDestination } from '../telemetry/logger.js'
import { StoreError } from '../storage/store.js'
import { SERVICE_VERSION, buildApp } from './app.js'
import { ConfigError, loadConfig, parseApiKeys, setupLine } from './config.js'

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/

/**
 * Starts the service from the environment, as `npm start` and `compaction-gateway serve` do: a bad
 * setting or database exits 78 naming it; SIGTERM and SIGINT close gracefully and exit 0.
 */
export async function serve(): Promise<void> {
  let config
  let keys
  try {
    config = loadConfig()
    keys = parseApiKeys(config.COMPACT_API_KEYS)
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
    app = await buildApp({ config, logStream: logDestination() })
  } catch (err) {
    if (err instanceof StoreError) {
      process.stderr.write(`compaction-gateway: COMPACT_DB: ${err.message}\n`)
      process.exit(78) // a bad database is a setting to fix, not a crash to restart in a loop
    }
    throw err
  }
  const grace = config.COMPACT_SHUTDOWN_GRACE_MS
  let closing = false
  const shutdown = (signal: string): void => {
    if (closing) return
    closing = true
    app.log.info({ signal }, 'shutting down: no new connections, in-flight compactions finish')
    const timer = setTimeout(() => {
      app.log.error('shutdown grace period over; exiting with requests still in flight')
      process.exit(1)
    }, grace)
    timer.unref()
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'error while closing')
        process.exit(1)
      }
    )
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))

  // Warm before taking traffic: the first compactions would otherwise pay for compiling the pipeline.
  await app.warm()
  const address = await app.listen({ port: config.PORT, host: config.HOST })
  app.log.info({ event: 'started', version: SERVICE_VERSION }, `compaction-gateway ${SERVICE_VERSION} at ${address}: ${setupLine(config, keys.size)}`)
}

/** Runs serve() as a process entry point. */
export function serveOrExit(): void {
  serve().catch((err: unknown) => {
    process.stderr.write(`compaction-gateway: failed to start: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  })
}
