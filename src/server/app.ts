import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import rateLimit from '@fastify/rate-limit'
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifyPluginOptions,
  type FastifyReply,
  type FastifyRequest
} from 'fastify'
import fp from 'fastify-plugin'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { masterKeys } from './master-key.js'
import type { KeyMaterial } from '../storage/keyring.js'
import type { DestinationStream, LoggerOptions } from 'pino'
import { rateLimitStore } from '../storage/redis.js'
import type { Store } from '../storage/store.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import { loggerOptions } from '../telemetry/logger.js'
import type { Metrics } from '../telemetry/metrics.js'
import { OPEN_ROUTES, authPlugin } from './auth.js'
import { readUi, uiRoutes } from './routes/ui.js'
import { summarizerKind } from '../summarizer/index.js'
import { type Config, parseApiKeys, trustProxy } from './config.js'
import { TenantNames } from '../service/tenants.js'
import { answerClientError, badUrl, errorHandlingPlugin } from './errors.js'
import { RateLimitError } from '../contract/errors.js'
import { admissionPlugin, lingerPlugin, requestChecksPlugin, shutdownDrainPlugin, timeoutsPlugin } from './guards.js'
import { jsonParserPlugin } from './json.js'
import { registerOpenapi } from './openapi.js'
import { compactionPlugin } from './plugins/compaction.js'
import { metricsPlugin } from './plugins/metrics.js'
import { proxyPlugin } from './plugins/proxy.js'
import { sharedStatePlugin } from './plugins/shared-state.js'
import { storePlugin } from './plugins/store.js'
import { compactRoutes } from './routes/compact.js'
import { doctrineRoutes } from './routes/doctrine.js'
import { readContract, siteRoutes } from './routes/site.js'
import { healthRoutes, keysCheck } from './routes/health.js'
import { probesPlugin } from './plugins/probes.js'
import { memoryRoutes } from './routes/memory.js'
import { mcpRoutes } from './routes/mcp.js'
import { messagesRoutes } from './routes/messages.js'
import { modelsRoutes } from './routes/models.js'
import { openAiRoutes } from './routes/openai.js'
import { metricsRoutes } from './routes/metrics.js'
import { overviewRoutes } from './routes/overview.js'
import { geminiRoutes } from './routes/gemini.js'
import { sessionRoutes } from './routes/sessions.js'
import { type ErrorResponseBody, SHARED_SCHEMAS } from '../contract/schemas.js'
import { routeValidatorCompiler } from '../contract/validation.js'
import { HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, LINGER_MS, MAX_PARAM_LENGTH, OVERLOADED_RETRY_AFTER_S, lingerBytes } from '../contract/defaults.js'
import { cachedSerializers } from './serializers.js'

export interface AppOptions {
  config: Config
  /** Pino options, or false for a silent app (tests). Defaults to JSON lines at config.LOG_LEVEL. */
  logger?: LoggerOptions | false
  /** Where log lines go instead of stdout (tests read them). */
  logStream?: DestinationStream
  /** A model summarizer to use instead of Anthropic's (it still runs behind the timeout and fallback). */
  summarizer?: Summarizer
  /** Makes summary ids; the default is random. */
  newId?: () => string
  /** Collect the routes into an OpenAPI document (app.swagger()); needs the dev dependency @fastify/swagger. */
  openapi?: boolean
  /** The store for records and the summary cache; by default SQLite at COMPACT_DB. The app closes it. */
  store?: Store
  /** The master keys, read already from COMPACT_MASTER_KEY… (the server reads them before it builds the app). */
  masterKeys?: KeyMaterial
  /** The clock for records, the cache and retention (tests move it). */
  now?: () => number
}

/** The service's version, read from package.json (beside src/ and dist/ alike); the OpenAPI document carries it. */
export const SERVICE_VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version

/** The app: Fastify with its plugins' decorations (metrics, store, redis, compaction, proxy, warm). */
export type App = FastifyInstance

export async function buildApp(options: AppOptions): Promise<App> {
  const { config } = options
  const logger =
    options.logger === false ? false : { ...(options.logger ?? loggerOptions(config.LOG_LEVEL)), ...(options.logStream ? { stream: options.logStream } : {}) }
  const app = Fastify({
    logger,
    bodyLimit: Math.floor(config.COMPACT_BODY_LIMIT_MB * 1024 * 1024),
    // Slow clients are bounded while they send (headers, then the whole body) and while they read the
    // answer (the idle timeout); no timeout runs while a compaction is being worked on (timeoutsPlugin).
    connectionTimeout: config.COMPACT_IDLE_TIMEOUT_MS,
    // (an answer the kernel's buffers took whole is finished for the server, read or not: a connection kept
    // alive after it is idle, and goes at the idle timeout like any other)
    keepAliveTimeout: Math.min(KEEP_ALIVE_TIMEOUT_MS, config.COMPACT_IDLE_TIMEOUT_MS),
    requestTimeout: config.COMPACT_BODY_TIMEOUT_MS,
    // Node looks for requests over their time at this interval (30 s by default): a quarter of the body timeout.
    http: { connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(config.COMPACT_BODY_TIMEOUT_MS / 4))) },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    trustProxy: trustProxy(config.COMPACT_TRUST_PROXY),
    frameworkErrors: badUrl,
    clientErrorHandler: answerClientError,
    genReqId: () => randomUUID(),
    logController: new AnsweredRequestLog(),
    requestIdHeader: 'x-request-id',
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } }
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, config.COMPACT_BODY_TIMEOUT_MS)
  // One validation engine for every route, with one set of options (contract/validation.ts): validation never
  // changes what a client sent (no stripped fields, no coerced body types), each schema compiled once.
  app.setValidatorCompiler(routeValidatorCompiler)
  app.decorateRequest('lineFields', null)
  await app.register(timeoutsPlugin, { idleTimeoutMs: config.COMPACT_IDLE_TIMEOUT_MS })
  await app.register(shutdownDrainPlugin)
  const now = options.now ?? Date.now

  const summarizer = summarizerKind(config)
  const keys = options.masterKeys ?? masterKeys(config)
  await app.register(metricsPlugin, { modelKind: summarizer === 'openai' || summarizer === 'gemini' ? summarizer : 'anthropic' })
  await app.register(storePlugin, {
    db: config.COMPACT_DB,
    retentionDays: config.COMPACT_RETENTION_DAYS,
    sessionBytes: Math.floor(config.COMPACT_MEMORY_SESSION_MB * 1_048_576),
    keys,
    now,
    ...(options.store ? { store: options.store } : {})
  })
  await app.register(sharedStatePlugin, { url: config.COMPACT_REDIS_URL })
  const { redis } = app
  if (options.openapi) await registerOpenapi(app, SERVICE_VERSION)
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  await app.register(errorHandlingPlugin)
  await app.register(jsonParserPlugin)
  await app.register(requestChecksPlugin)
  // Bytes of bodies in flight are bounded, counted as they arrive; a refusal lets the client finish sending.
  await app.register(admissionPlugin, { maxBytes: config.COMPACT_MAX_INFLIGHT_MB * 1024 * 1024, retryAfterS: OVERLOADED_RETRY_AFTER_S })
  await app.register(lingerPlugin, { maxBytes: lingerBytes(Math.floor(config.COMPACT_BODY_LIMIT_MB * 1024 * 1024)), ms: LINGER_MS })
  await app.register(responseHooksPlugin)

  // Auth first, then the per-key rate limit, both before the body is read.
  const apiKeys = parseApiKeys(config.COMPACT_API_KEYS)
  const tenants = new TenantNames(app.store, app.log, now)
  await app.register(authPlugin, { keys: apiKeys, failuresPerMinute: config.COMPACT_AUTH_FAILURES_PER_MIN, now, tenantOf: (d) => tenants.of(d) })
  await app.register(rateLimit, {
    max: config.COMPACT_RATE_LIMIT_PER_MIN,
    timeWindow: 60_000,
    keyGenerator: (request) => (request.keyName ? `key:${request.keyName}` : `ip:${request.ip}`),
    allowList: (request) => OPEN_ROUTES.has(request.url.split('?', 1)[0] ?? ''),
    // With Redis, one budget across the replicas (each counts alone while Redis is away).
    ...(redis ? { store: rateLimitStore(redis) } : {}),
    errorResponseBuilder: (_request, context) =>
      new RateLimitError(`rate limit of ${context.max} requests per minute reached; retry in ${context.after}`, Math.ceil(context.ttl / 1_000))
  })

  await app.register(compactionPlugin, {
    config,
    now,
    ...(options.summarizer ? { summarizer: options.summarizer } : {}),
    ...(options.newId ? { newId: options.newId } : {})
  })
  await app.register(proxyPlugin, { config, keys })

  await app.register(routes(healthRoutes, 'store'))
  await app.register(routes(metricsRoutes, 'metrics'))
  // the probes on a listener and a thread of their own too, where a flood cannot hold them up (COMPACT_PROBE_PORT)
  await app.register(probesPlugin, {
    host: config.HOST,
    ...(config.COMPACT_PROBE_PORT !== undefined ? { port: config.COMPACT_PROBE_PORT } : {}),
    keys: keysCheck(app.masterKeyId)
  })
  await app.register(doctrineRoutes)
  await app.register(siteRoutes, { version: SERVICE_VERSION, contract: readContract() })
  await app.register(uiRoutes, { files: readUi() })
  await app.register(routes(sessionRoutes, 'store', 'proxy', 'shared-state'))
  const prices = {
    currency: config.COMPACT_PRICE_CURRENCY,
    input: config.COMPACT_PRICE_INPUT,
    output: config.COMPACT_PRICE_OUTPUT,
    cache_write: config.COMPACT_PRICE_CACHE_WRITE,
    cache_read: config.COMPACT_PRICE_CACHE_READ
  }
  app.decorate('prices', prices)
  await app.register(routes(overviewRoutes, 'store'))
  await app.register(routes(memoryRoutes, 'store', 'metrics'))
  if (config.COMPACT_RECALL !== 'off') await app.register(routes(mcpRoutes, 'store'), { version: SERVICE_VERSION })
  await app.register(routes(compactRoutes, 'compaction', 'store', 'metrics'))
  // the proxies' policy (budget, credentials, who performs context management) is the proxy plugin's (app.proxy.policy)
  await app.register(routes(messagesRoutes, 'proxy', 'store', 'metrics'))
  await app.register(routes(openAiRoutes, 'proxy', 'store', 'metrics'))
  await app.register(routes(modelsRoutes, 'proxy'))
  await app.register(routes(geminiRoutes, 'proxy', 'store', 'metrics'))
  return app as unknown as App
}

/**
 * One log line a request, when it is answered, with the request's fields: the line Fastify writes at its
 * arrival said nothing the answer's does not, and was a third of the proxy's log writes.
 */
declare module 'fastify' {
  interface FastifyReply {
    /**
     * The headers every answer carries: its request id, and `connection: close` while the server closes
     * (so that a keep-alive socket cannot hold the shutdown open): set by an onSend hook, and by an answer
     * written past Fastify's send (the proxy's relay).
     */
    stamp(): void
  }
  interface FastifyRequest {
    /** Fields a handler adds to its request's one log line (a proxied request's upstream status and timings), instead of a line of its own. */
    lineFields: Record<string, unknown> | null
  }
}

class AnsweredRequestLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const added = request.lineFields
    if (error) reply.log.error({ ...added, req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    else reply.log.info({ ...added, req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}

/** A routes plugin, still encapsulated, that says which plugins it needs (Fastify checks they were registered first). */
function routes<O extends FastifyPluginOptions>(plugin: FastifyPluginAsync<O>, ...dependencies: string[]): FastifyPluginAsync<O> {
  return fp(plugin, { encapsulate: true, dependencies })
}

/** Hooks on every answer: the request id, closing connections while shutting down, refusals logged, durations measured. */
const responseHooksPlugin = fp(
  async (app) => {
    installResponseHooks(app, app.metrics)
  },
  { name: 'response-hooks', dependencies: ['metrics'] }
)

function installResponseHooks(app: FastifyInstance, metrics: Metrics): void {
  // While closing, answers in flight tell the client to drop the connection, so that a keep-alive
  // socket cannot hold the shutdown open until its idle timeout.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })
  app.decorateReply('stamp', function stamp(this: FastifyReply) {
    void this.header('x-request-id', this.request.id)
    if (closing) void this.header('connection', 'close')
  })
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.stamp()
    // A refused request is logged with why and where (the error body: small, and never message content).
    if (reply.statusCode >= 400 && reply.statusCode < 500 && typeof payload === 'string' && payload.startsWith('{"type":"error"')) {
      const { error } = JSON.parse(payload) as ErrorResponseBody
      request.log.info(
        { event: 'request_refused', status: reply.statusCode, error_type: error.type, reason: error.message, path: error.path },
        'request refused'
      )
    }
    done(null, payload)
  })
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched'
    metrics.httpDuration.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1_000)
    done()
  })
}
