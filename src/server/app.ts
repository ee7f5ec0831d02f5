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
import type { DestinationStream, LoggerOptions } from 'pino'
import { rateLimitStore } from '../storage/redis.js'
import type { Store } from '../storage/store.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import { loggerOptions } from '../telemetry/logger.js'
import type { Metrics } from '../telemetry/metrics.js'
import { OPEN_ROUTES, authPlugin } from './auth.js'
import { readUi, uiRoutes } from './routes/ui.js'
import { summarizerKind } from '../summarizer/index.js'
import { type Config, DEFAULT_OPENAI_BASE_URL, parseApiKeys, trustProxy, usesClientModel } from './config.js'
import { DEFAULT_UPSTREAM_URL } from '../contract/defaults.js'
import type { ClientSummaries } from '../proxy/client-summaries.js'
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
import { healthRoutes } from './routes/health.js'
import { memoryRoutes } from './routes/memory.js'
import { messagesRoutes } from './routes/messages.js'
import { modelsRoutes } from './routes/models.js'
import { openAiRoutes } from './routes/openai.js'
import { metricsRoutes } from './routes/metrics.js'
import { overviewRoutes } from './routes/overview.js'
import { geminiRoutes } from './routes/gemini.js'
import { sessionRoutes } from './routes/sessions.js'
import { type ErrorResponseBody, SHARED_SCHEMAS } from '../contract/schemas.js'
import { HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, LINGER_MS, MAX_PARAM_LENGTH, OVERLOADED_RETRY_AFTER_S, lingerBytes } from '../contract/defaults.js'

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
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
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
    // Validation must never change what a client sent: no stripped fields, no coerced types.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } }
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, config.COMPACT_BODY_TIMEOUT_MS)
  app.decorateRequest('lineFields', null)
  await app.register(timeoutsPlugin, { idleTimeoutMs: config.COMPACT_IDLE_TIMEOUT_MS })
  await app.register(shutdownDrainPlugin)
  const now = options.now ?? Date.now

  const summarizer = summarizerKind(config)
  await app.register(metricsPlugin, { modelKind: summarizer === 'openai' || summarizer === 'gemini' ? summarizer : 'anthropic' })
  await app.register(storePlugin, {
    db: config.COMPACT_DB,
    retentionDays: config.COMPACT_RETENTION_DAYS,
    now,
    ...(options.store ? { store: options.store } : {})
  })
  await app.register(sharedStatePlugin, { url: config.COMPACT_REDIS_URL })
  const { metrics, redis } = app
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
  await app.register(authPlugin, { keys: apiKeys, failuresPerMinute: config.COMPACT_AUTH_FAILURES_PER_MIN, now })
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
  await app.register(proxyPlugin, { config })

  await app.register(routes(healthRoutes, 'store'))
  await app.register(routes(metricsRoutes, 'metrics'), { metrics })
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
  await app.register(routes(overviewRoutes, 'store'), { prices, now })
  await app.register(routes(memoryRoutes, 'store', 'metrics'))
  await app.register(routes(compactRoutes, 'compaction', 'store', 'metrics'), { workerMinBytes: config.COMPACT_WORKER_MIN_KB * 1024 })
  const budget = config.COMPACT_BUDGET
  const anthropic = upstreamCredentials(config.ANTHROPIC_API_KEY, apiKeys.size > 0)
  const openai = openAiCredentials(config.OPENAI_API_KEY, apiKeys.size > 0)
  // With no model of its own (and not told to stay extractive), the gateway has the client's own model write
  // its conversation's summaries, with the client's credentials (never a gateway key: there is none then).
  const clientSummaries: ClientSummaries | undefined = usesClientModel(config)
    ? {
        baseUrl: config.ANTHROPIC_BASE_URL ?? DEFAULT_UPSTREAM_URL,
        // OpenAI's APIs too, where what they are forwarded with is the client's own key (the gateway has none)
        ...(config.OPENAI_API_KEY ? {} : { openAiBaseUrl: config.OPENAI_BASE_URL ?? DEFAULT_OPENAI_BASE_URL }),
        timeoutMs: config.COMPACT_SUMMARIZER_TIMEOUT_MS,
        fallback: config.COMPACT_FALLBACK
      }
    : undefined
  await app.register(routes(messagesRoutes, 'proxy', 'store', 'metrics'), {
    budget,
    credentials: anthropic,
    contextManagement: contextManagement(config),
    ...(clientSummaries ? { clientSummaries } : {})
  })
  await app.register(routes(openAiRoutes, 'proxy', 'store', 'metrics'), {
    budget,
    credentials: openai,
    contextManagement: openAiContextManagement(config),
    ...(clientSummaries ? { clientSummaries } : {})
  })
  await app.register(routes(modelsRoutes, 'proxy'), { anthropic, openai })
  await app.register(routes(geminiRoutes, 'proxy', 'store', 'metrics'), { budget, credentials: geminiCredentials(config.GEMINI_API_KEY, apiKeys.size > 0) })
  return app as unknown as App
}

/**
 * Who performs the Messages API's context editing: the gateway, or the upstream (the field forwarded
 * untouched). `auto`: Anthropic's own API has it (and its default for thinking differs where the field is
 * absent, so taking it out would change the prompt it caches); any other upstream gets the gateway's.
 */
function contextManagement(config: Config): 'gateway' | 'forward' {
  if (config.COMPACT_CONTEXT_MANAGEMENT !== 'auto') return config.COMPACT_CONTEXT_MANAGEMENT
  return (config.ANTHROPIC_BASE_URL ?? DEFAULT_UPSTREAM_URL).replace(/\/+$/, '') === DEFAULT_UPSTREAM_URL ? 'forward' : 'gateway'
}

/** Who performs the Responses API's compaction: `auto` forwards to OpenAI's own API, which has it, and performs it for any other upstream. */
function openAiContextManagement(config: Config): 'gateway' | 'forward' {
  if (config.COMPACT_CONTEXT_MANAGEMENT !== 'auto') return config.COMPACT_CONTEXT_MANAGEMENT
  return (config.OPENAI_BASE_URL ?? DEFAULT_OPENAI_BASE_URL).replace(/\/+$/, '') === DEFAULT_OPENAI_BASE_URL ? 'forward' : 'gateway'
}

/**
 * One log line a request, when it is answered, with the request's fields: the line Fastify writes at its
 * arrival said nothing the answer's does not, and was a third of the proxy's log writes.
 */
declare module 'fastify' {
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
  app.addHook('onSend', (request, reply, payload, done) => {
    void reply.header('x-request-id', request.id)
    if (closing) void reply.header('connection', 'close')
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

/**
 * What the proxy sends upstream as credentials: the gateway's ANTHROPIC_API_KEY; without one, and only
 * when the gateway checks no keys of its own (so the client's key is not a gateway key), the client's own
 * x-api-key or Authorization; else nothing can be sent (undefined).
 */
function upstreamCredentials(gatewayKey: string | undefined, checksKeys: boolean): (request: FastifyRequest) => Record<string, string> | undefined {
  if (gatewayKey) return () => ({ 'x-api-key': gatewayKey })
  if (checksKeys) return () => undefined
  return (request) => {
    const own: Record<string, string> = {}
    const { authorization } = request.headers
    const apiKey = request.headers['x-api-key']
    if (typeof apiKey === 'string') own['x-api-key'] = apiKey
    if (typeof authorization === 'string') own.authorization = authorization
    return own
  }
}

/**
 * What the Gemini proxy sends upstream as credentials: the gateway's GEMINI_API_KEY as `x-goog-api-key`;
 * without one and without keys of its own, the client's (its header, or its `key` in the query, moved into
 * the header); with keys and none of its own, none.
 */
function geminiCredentials(gatewayKey: string | undefined, checksKeys: boolean): (request: FastifyRequest) => Record<string, string> | undefined {
  if (gatewayKey) return () => ({ 'x-goog-api-key': gatewayKey })
  if (checksKeys) return () => undefined
  return (request) => {
    const own = request.headers['x-goog-api-key']
    if (typeof own === 'string') return { 'x-goog-api-key': own }
    const at = request.url.indexOf('?')
    const key = at < 0 ? null : new URLSearchParams(request.url.slice(at + 1)).get('key')
    const out: Record<string, string> = {}
    if (key) out['x-goog-api-key'] = key
    return out
  }
}

/**
 * What the OpenAI proxies send upstream as credentials: the gateway's OPENAI_API_KEY as a bearer token;
 * without one, and only when the gateway checks no keys of its own, the client's own Authorization.
 */
function openAiCredentials(gatewayKey: string | undefined, checksKeys: boolean): (request: FastifyRequest) => Record<string, string> | undefined {
  if (gatewayKey) return () => ({ authorization: `Bearer ${gatewayKey}` })
  if (checksKeys) return () => undefined
  return (request) => {
    const own: Record<string, string> = {}
    if (typeof request.headers.authorization === 'string') own.authorization = request.headers.authorization
    return own
  }
}
