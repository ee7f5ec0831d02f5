import { type DestinationStream, type LoggerOptions, pino } from 'pino'
import { LOG_FLUSH_MS } from '../contract/defaults.js'

/** Headers that carry credentials never reach a log line. */
export const REDACTED_PATHS = ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'res.headers["set-cookie"]']

/** The URL as it may be logged: the path, and the names (never the values) of query parameters. */
export function loggableUrl(url: string): string {
  const q = url.indexOf('?')
  if (q < 0) return url
  const names = [...new URLSearchParams(url.slice(q + 1)).keys()]
  return `${url.slice(0, q)}?${names.map((n) => `${encodeURIComponent(n)}=…`).join('&')}`
}

interface LoggedRequest {
  method: string
  url: string
  host?: string
  ip?: string
  socket?: { remotePort?: number }
}

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    serializers: {
      // Fastify's own request fields, with the query's values left out: a value there may be a key.
      req: (req: LoggedRequest) => ({
        method: req.method,
        url: loggableUrl(req.url),
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort
      })
    },
    redact: { paths: REDACTED_PATHS, censor: '[REDACTED]' },
    base: { service: 'compaction-gateway' },
    timestamp: () => `,"time":"${new Date().toISOString()}"`
  }
}

/**
 * Standard output for the service's log lines, written in batches off the request's path: lines wait until
 * 4 KiB have gathered or LOG_FLUSH_MS has passed, and are written at exit: a write per line was a large
 * share of the proxy's CPU (docs/performance.md), and on two cores the write's thread also took the core
 * from the request it was logging.
 */
export function logDestination(): DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: 4_096, periodicFlush: LOG_FLUSH_MS })
}
