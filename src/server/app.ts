import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { LoggerOptions } from 'pino'
import { ExtractiveSummarizer } from '../summarizer/extractive.js'
import { modelSummarizer } from '../summarizer/index.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import { loggerOptions } from '../telemetry/logger.js'
import type { Config } from './config.js'
import { installErrorHandling } from './errors.js'
import { compactRoutes } from './routes/compact.js'
import { doctrineRoutes } from './routes/doctrine.js'
import { registerOpenapi } from './openapi.js'
import { healthRoutes } from './routes/health.js'
import { SHARED_SCHEMAS } from './schemas.js'

export interface AppOptions {
  config: Config
  /** Pino options, or false for a silent app (tests). Defaults to JSON lines at config.LOG_LEVEL. */
  logger?: LoggerOptions | false
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

/** The service's version, as package.json has it; the OpenAPI document carries it. */
export const SERVICE_VERSION = '0.1.0'

export type App = FastifyInstance

export async function buildApp(options: AppOptions): Promise<App> {
  const { config } = options
  const app = Fastify({
    logger: options.logger === false ? false : (options.logger ?? loggerOptions(config.LOG_LEVEL)),
    bodyLimit: Math.floor(config.COMPACT_BODY_LIMIT_MB * 1024 * 1024),
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    genReqId: () => randomUUID(),
    requestIdHeader: 'x-request-id',
    // Validation must never change what a client sent: no stripped fields, no coerced types.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } }
  }).withTypeProvider<TypeBoxTypeProvider>()

  if (options.openapi) await registerOpenapi(app, SERVICE_VERSION)
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  installErrorHandling(app)
  app.addHook('onSend', async (request, reply) => {
    void reply.header('x-request-id', request.id)
  })

  await app.register(healthRoutes)
  await app.register(doctrineRoutes)
  await app.register(compactRoutes, {
    deps: {
      defaults: { budgetTokens: config.COMPACT_BUDGET, keepTokens: config.COMPACT_KEEP_TOKENS, keepTurns: config.COMPACT_KEEP_TURNS },
      model: modelSummarizer(config, options.summarizer),
      extractive: new ExtractiveSummarizer(),
      newId: options.newId ?? (() => `cmp_${randomUUID().replace(/-/g, '')}`),
      now: () => performance.now()
    }
  })
  return app
}
