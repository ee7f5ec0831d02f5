import { randomUUID } from 'node:crypto'
import type { Writable } from 'node:stream'
import rateLimit from '@fastify/rate-limit'
import Fastify, { type FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { LoggerOptions } from 'pino'
import { ExtractiveSummarizer } from '../summarizer/extractive.js'
import { modelSummarizer } from '../summarizer/index.js'
import { LimitedSummarizer } from '../summarizer/limit.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import { loggerOptions } from '../telemetry/logger.js'
import { type Metrics, createMetrics } from '../telemetry/metrics.js'
import { installAuth } from './auth.js'
import { type Config, parseApiKeys } from './config.js'
import { ApiError, installErrorHandling } from './errors.js'
import { registerOpenapi } from './openapi.js'
import { compactRoutes } from './routes/compact.js'
import { doctrineRoutes } from './routes/doctrine.js'
import { healthRoutes } from './routes/health.js'
import { metricsRoutes } from './routes/metrics.js'
import { SHARED_SCHEMAS } from './schemas.js'

export interface AppOptions {
  config: Config
  /** Pino options, or false for a silent app (tests). Defaults to JSON lines at config.LOG_LEVEL. */
  logger?: LoggerOptions | false
  /** Where log lines go instead of stdout (tests read them). */
  logStream?: Writable
  /** A model summarizer to use instead of Anthropic's (it still runs behind the timeout and fallback). */
  summarizer?: Summarizer
  /** Makes summary ids; the default is random. */
  newId?: () => string
  /** Collect the routes into an OpenAPI document (app.swagger()); needs the dev dependency @fastify/swagger. */
  openapi?: boolean
}

/** Explicit socket timeouts, so that a slow or idle client cannot hold a connection forever. */
export const CONNECTION_TIMEOUT_MS = 10_000
export const KEEP_ALIVE_TIMEOUT_MS = 72_000
/** Long enough for a folded summary of a very large history through the model. */
export const REQUEST_TIMEOUT_MS = 300_000
/** What a 503 for too many summaries in flight tells the client to wait. */
export const OVERLOADED_RETRY_AFTER_S = 5

/** The service's version, as package.json has it; the OpenAPI document carries it. */
export const SERVICE_VERSION = '0.1.0'

export type App = FastifyInstance & { metrics: Metrics }

export async function buildApp(options: AppOptions): Promise<App> {
  const { config } = options
  const logger = options.logger === false ? false : { ...(options.logger ?? loggerOptions(config.LOG_LEVEL)), ...(options.logStream ? { stream: options.logStream } : {}) }
  const app = Fastify({
    logger,
    bodyLimit: Math.floor(config.COMPACT_BODY_LIMIT_MB * 1024 * 1024),
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    genReqId: () => randomUUID(),
    requestIdHeader: 'x-request-id',
    // Validation must never change what a client sent: no stripped fields, no coerced types.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } }
  }).withTypeProvider<TypeBoxTypeProvider>()

  const metrics = createMetrics()
  app.decorate('metrics', metrics)
  if (options.openapi) await registerOpenapi(app, SERVICE_VERSION)
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  installErrorHandling(app)
  // While closing, answers in flight tell the client to drop the connection, so that a keep-alive
  // socket cannot hold the shutdown open until its idle timeout.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })
  app.addHook('onSend', async (request, reply) => {
    void reply.header('x-request-id', request.id)
    if (closing) void reply.header('connection', 'close')
  })
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched'
    metrics.httpDuration.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1_000)
  })

  // Auth first, then the per-key rate limit, both before the body is read.
  installAuth(app, parseApiKeys(config.COMPACT_API_KEYS))
  await app.register(rateLimit, {
    max: config.COMPACT_RATE_LIMIT_PER_MIN,
    timeWindow: 60_000,
    keyGenerator: (request) => (request.keyName ? `key:${request.keyName}` : `ip:${request.ip}`),
    allowList: (request) => ['/healthz', '/readyz', '/metrics'].includes(request.url.split('?')[0]!),
    errorResponseBuilder: (_request, context) =>
      new ApiError(429, 'rate_limit_error', `rate limit of ${context.max} requests per minute reached; retry in ${context.after}`, undefined, {
        'retry-after': String(Math.ceil(context.ttl / 1_000))
      })
  })

  const model = modelSummarizer(config, options.summarizer)
  await app.register(healthRoutes)
  await app.register(metricsRoutes, { metrics })
  await app.register(doctrineRoutes)
  await app.register(compactRoutes, {
    metrics,
    deps: {
      defaults: { budgetTokens: config.COMPACT_BUDGET, keepTokens: config.COMPACT_KEEP_TOKENS, keepTurns: config.COMPACT_KEEP_TURNS },
      model: model
        ? new LimitedSummarizer(model, { concurrency: config.COMPACT_MAX_SUMMARIES, queue: config.COMPACT_SUMMARY_QUEUE, retryAfterS: OVERLOADED_RETRY_AFTER_S })
        : undefined,
      extractive: new ExtractiveSummarizer(),
      newId: options.newId ?? (() => `cmp_${randomUUID().replace(/-/g, '')}`),
      now: () => performance.now()
    }
  })
  return app as unknown as App
}
