import type { LoggerOptions } from 'pino'

/** Headers that carry credentials never reach a log line. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'res.headers["set-cookie"]'
]

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[REDACTED]' },
    base: { service: 'compaction-gateway' },
    timestamp: () => `,"time":"${new Date().toISOString()}"`
  }
}
