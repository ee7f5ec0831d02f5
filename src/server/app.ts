import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import type { Writable } from 'node:stream'
import rateLimit from '@fastify/rate-limit'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { LoggerOptions } from 'pino'
import { ExtractiveSummarizer } from '../summarizer/extractive.js'
import { modelSummarizer } from '../summarizer/index.js'
import { type CompactDeps, runCompaction } from '../service/compact.js'
import { CachingSummarizer } from '../summarizer/cache.js'
import { LimitedSummarizer } from '../summarizer/limit.js'
import { SqliteStore } from '../storage/sqlite.js'
import { PostgresStore, isPostgresUrl } from '../storage/postgres.js'
import { type SharedState, connectRedis, rateLimitStore, redisFlight } from '../storage/redis.js'
import { CompactionPool } from '../workers/pool.js'
import type { Store } from '../storage/store.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import { loggerOptions } from '../telemetry/logger.js'
import { type Metrics, createMetrics, initializeSeries } from '../telemetry/metrics.js'
import { OPEN_ROUTES, installAuth } from './auth.js'
import { type Config, DEFAULT_UPSTREAM_URL, parseApiKeys, trustProxy } from './config.js'
import { ApiError, answerClientError, badUrl, installErrorHandling } from './errors.js'
import { installAdmission, installRequestChecks, installTimeouts } from './guards.js'
import { installJsonParser } from './json.js'
import { registerOpenapi } from './openapi.js'
import { compactRoutes } from './routes/compact.js'
import { doctrineRoutes } from './routes/doctrine.js'
import { healthRoutes } from './routes/health.js'
import { memoryRoutes } from './routes/memory.js'
import { messagesRoutes } from './routes/messages.js'
import { ProxyCompactor } from '../proxy/compactor.js'
import { Upstream } from '../proxy/upstream.js'
import { metricsRoutes } from './routes/metrics.js'
import { sessionRoutes } from './routes/sessions.js'
import { type ErrorResponseBody, SHARED_SCHEMAS } from '../contract/schemas.js'

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
  /** The store for records and the summary cache; by default SQLite at COMPACT_DB. The app closes it. */
  store?: Store
  /** The clock for records, the cache and retention (tests move it). */
  now?: () => number
}

/** How often old records and expired cache rows are pruned. */
export const PRUNE_INTERVAL_MS = 3_600_000

/** How long a kept-alive connection may sit idle between requests. */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000
/** The request line and headers must arrive within this (and within the body timeout). */
export const HEADERS_TIMEOUT_MS = 20_000
/** A route or session id in the URL may be this long (a session id of 200 characters, percent-encoded). */
export const MAX_PARAM_LENGTH = 1_000
/** A small history that runs every stage of the pipeline, for warming it at boot. */
const WARM_HISTORY = [
  { role: 'user' as const, content: 'Fix the failing test in tests/test_a.py; password=warm-up-only-1' },
  { role: 'assistant' as const, content: [{ type: 'tool_use', id: 'w1', name: 'bash', input: { command: "sed -i 's/a/b/' src/a.py && pytest -x" } }] },
  { role: 'user' as const, content: [{ type: 'tool_result', tool_use_id: 'w1', content: 'FAILED tests/test_a.py::test_x - AssertionError\n<returncode>1</returncode>', is_error: true }] },
  { role: 'assistant' as const, content: 'Fixed it.' },
  { role: 'user' as const, content: 'thanks' }
]

/** What a 503 for too many summaries in flight tells the client to wait. */
export const OVERLOADED_RETRY_AFTER_S = 5

/** The service's version, read from package.json (beside src/ and dist/ alike); the OpenAPI document carries it. */
export const SERVICE_VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version

export type App = FastifyInstance & { metrics: Metrics; store: Store; pool: CompactionPool | undefined; warm: () => Promise<void> }

export async function buildApp(options: AppOptions): Promise<App> {
  const { config } = options
  const logger = options.logger === false ? false : { ...(options.logger ?? loggerOptions(config.LOG_LEVEL)), ...(options.logStream ? { stream: options.logStream } : {}) }
  const app = Fastify({
    logger,
    bodyLimit: Math.floor(config.COMPACT_BODY_LIMIT_MB * 1024 * 1024),
    // Slow clients are bounded while they send (headers, then the whole body) and while they read the
    // answer (the idle timeout); no timeout runs while a compaction is being worked on (installTimeouts).
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
    requestIdHeader: 'x-request-id',
    // Validation must never change what a client sent: no stripped fields, no coerced types.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } }
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, config.COMPACT_BODY_TIMEOUT_MS)
  installTimeouts(app, config.COMPACT_IDLE_TIMEOUT_MS)

  const metrics = createMetrics()
  initializeSeries(metrics)
  app.decorate('metrics', metrics)
  // Opening the store first: a database that cannot be opened stops the start, naming the file.
  const store = options.store ?? openStore(app, config.COMPACT_DB, metrics)
  app.decorate('store', store)
  const shared = config.COMPACT_REDIS_URL ? sharedState(app, config.COMPACT_REDIS_URL) : undefined
  const now = options.now ?? Date.now
  const prune = async (): Promise<void> => {
    try {
      const pruned = await store.prune(now() - config.COMPACT_RETENTION_DAYS * 86_400_000, now())
      if (pruned.records + pruned.cache + pruned.memory > 0) app.log.info({ event: 'store_pruned', ...pruned }, 'store_pruned')
    } catch (err) {
      metrics.storeErrors.inc({ operation: 'prune' })
      app.log.error({ err }, 'store prune failed')
    }
  }
  const pruneTimer = setInterval(() => void prune(), PRUNE_INTERVAL_MS)
  pruneTimer.unref()
  app.addHook('onReady', async () => prune())
  app.addHook('onClose', async () => {
    clearInterval(pruneTimer)
    await store.close()
  })
  if (options.openapi) await registerOpenapi(app, SERVICE_VERSION)
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  installErrorHandling(app)
  installJsonParser(app)
  installRequestChecks(app)
  // Bytes of bodies in flight are bounded: past the bound a request is turned away before it is read.
  installAdmission(app, { maxBytes: config.COMPACT_MAX_INFLIGHT_MB * 1024 * 1024, bodyLimit: Math.floor(config.COMPACT_BODY_LIMIT_MB * 1024 * 1024), retryAfterS: OVERLOADED_RETRY_AFTER_S })
  // While closing, answers in flight tell the client to drop the connection, so that a keep-alive
  // socket cannot hold the shutdown open until its idle timeout.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })
  app.addHook('onSend', async (request, reply, payload) => {
    void reply.header('x-request-id', request.id)
    if (closing) void reply.header('connection', 'close')
    // A refused request is logged with why and where (the error body: small, and never message content).
    if (reply.statusCode >= 400 && reply.statusCode < 500 && typeof payload === 'string' && payload.startsWith('{"type":"error"')) {
      const { error } = JSON.parse(payload) as ErrorResponseBody
      request.log.info({ event: 'request_refused', status: reply.statusCode, error_type: error.type, reason: error.message, path: error.path }, 'request refused')
    }
  })
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched'
    metrics.httpDuration.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1_000)
  })

  // Auth first, then the per-key rate limit, both before the body is read.
  const apiKeys = parseApiKeys(config.COMPACT_API_KEYS)
  installAuth(app, apiKeys, { failuresPerMinute: config.COMPACT_AUTH_FAILURES_PER_MIN, now })
  await app.register(rateLimit, {
    max: config.COMPACT_RATE_LIMIT_PER_MIN,
    timeWindow: 60_000,
    keyGenerator: (request) => (request.keyName ? `key:${request.keyName}` : `ip:${request.ip}`),
    allowList: (request) => OPEN_ROUTES.has(request.url.split('?', 1)[0] ?? ''),
    // With Redis, one budget across the replicas (each counts alone while Redis is away).
    ...(shared ? { store: rateLimitStore(shared) } : {}),
    errorResponseBuilder: (_request, context) =>
      new ApiError(429, 'rate_limit_error', `rate limit of ${context.max} requests per minute reached; retry in ${context.after}`, undefined, {
        'retry-after': String(Math.ceil(context.ttl / 1_000))
      })
  })

  const resilient = modelSummarizer(config, options.summarizer)
  const limited = resilient
    ? new LimitedSummarizer(resilient, {
        concurrency: config.COMPACT_MAX_SUMMARIES,
        queue: config.COMPACT_SUMMARY_QUEUE,
        // A summary waits for a place no longer than one summary may take.
        maxWaitMs: config.COMPACT_SUMMARIZER_TIMEOUT_MS,
        retryAfterS: OVERLOADED_RETRY_AFTER_S
      })
    : undefined
  if (limited) metrics.summaryLoad.read = () => limited.load
  const model = limited
    ? new CachingSummarizer(limited, {
        store,
        ttlMs: config.COMPACT_CACHE_TTL_S * 1_000,
        model: config.COMPACT_MODEL,
        now,
        ...(shared ? { flight: redisFlight(shared, randomUUID()), flightTtlMs: 2 * config.COMPACT_SUMMARIZER_TIMEOUT_MS + 5_000 } : {}),
        onStoreError: (operation, err) => {
          metrics.storeErrors.inc({ operation })
          app.log.error({ err, operation }, 'summary cache failed; served without it')
        }
      })
    : undefined
  await app.register(healthRoutes, { store })
  await app.register(metricsRoutes, { metrics })
  await app.register(doctrineRoutes)
  await app.register(sessionRoutes, { store })
  await app.register(memoryRoutes, { store, metrics })
  // Workers take large extractive compactions off the event loop; with a model summarizer the route runs inline.
  const pool = config.COMPACT_WORKERS > 0 && !model ? new CompactionPool(config.COMPACT_WORKERS) : undefined
  app.decorate('pool', pool)
  app.addHook('onClose', async () => pool?.close())
  const deps = {
    defaults: { budgetTokens: config.COMPACT_BUDGET, keepTokens: config.COMPACT_KEEP_TOKENS, keepTurns: config.COMPACT_KEEP_TURNS },
    model,
    extractive: new ExtractiveSummarizer(),
    newId: options.newId ?? (() => `cmp_${randomUUID().replace(/-/g, '')}`),
    now: () => performance.now(),
    coldLayer: true
  }
  // The first compactions after boot pay for compiling the pipeline; warming runs one small one
  // inline and one in every worker, so that they do not.
  app.decorate('warm', async () => {
    // extractive: warming never calls (or pays for) a model
    const body = { mode: 'manual' as const, summarizer: 'extractive' as const, messages: WARM_HISTORY }
    await runCompaction(body, deps, { tenant: '' })
    await pool?.warm({ defaults: deps.defaults, tenant: '', coldLayer: false }, Buffer.from(JSON.stringify(body)))
  })
  await app.register(compactRoutes, {
    metrics,
    store,
    pool,
    workerMinBytes: config.COMPACT_WORKER_MIN_KB * 1024,
    deps
  })
  await app.register(messagesRoutes, {
    upstream: proxyUpstream(app, config),
    compactor: proxyCompactor(app, config, deps, metrics, limited),
    metrics,
    store,
    budget: config.COMPACT_BUDGET,
    credentials: upstreamCredentials(config.ANTHROPIC_API_KEY, apiKeys.size > 0),
    streamIdleMs: config.COMPACT_UPSTREAM_TIMEOUT_MS
  })
  return app as unknown as App
}

/** SQLite at a path, or PostgreSQL at a postgres:// URL (its faults logged and counted, never fatal after start). */
function openStore(app: FastifyInstance, db: string, metrics: Metrics): Store {
  if (!isPostgresUrl(db)) return new SqliteStore(db)
  return new PostgresStore(db, {
    onPoolError: (err) => {
      metrics.storeErrors.inc({ operation: 'connection' })
      app.log.error({ err, event: 'store_connection_lost' }, 'a PostgreSQL connection failed; the pool reconnects')
    }
  })
}

/** Redis for what the replicas share; it going away is logged once, and its coming back once. */
function sharedState(app: FastifyInstance, url: string): SharedState {
  const shared = connectRedis(url, {
    onDown: (err) => app.log.error({ err, event: 'redis_down' }, 'Redis is unavailable: rate limits and summaries in flight are per replica until it is back'),
    onUp: () => app.log.info({ event: 'redis_up' }, 'Redis is back: rate limits and summaries in flight are shared again')
  })
  app.addHook('onClose', async () => shared.close())
  return shared
}

function proxyUpstream(app: FastifyInstance, config: Config): Upstream {
  const upstream = new Upstream({ baseUrl: config.ANTHROPIC_BASE_URL ?? DEFAULT_UPSTREAM_URL, timeoutMs: config.COMPACT_UPSTREAM_TIMEOUT_MS, connections: config.COMPACT_UPSTREAM_CONNECTIONS })
  app.addHook('onClose', async () => upstream.close())
  return upstream
}

function proxyCompactor(app: FastifyInstance, config: Config, deps: CompactDeps, metrics: Metrics, limited: LimitedSummarizer | undefined): ProxyCompactor {
  const compactor = new ProxyCompactor({
    deps,
    precomputeAt: config.COMPACT_PRECOMPUTE_AT === 'off' ? undefined : config.COMPACT_PRECOMPUTE_AT,
    // Background summaries take a free place only: they never queue ahead of a client's.
    canPrecompute: () => {
      const load = limited?.load
      return load !== undefined && load.waiting === 0 && load.active < config.COMPACT_MAX_SUMMARIES
    },
    onPrecompute: (event, err) => {
      metrics.proxyPrecomputes.inc({ event })
      if (err) app.log.warn({ err, event: 'precompute_failed' }, 'a background summary failed')
    }
  })
  app.addHook('preClose', async () => compactor.close())
  return compactor
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
