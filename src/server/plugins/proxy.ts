import fp from 'fastify-plugin'
import { ProxyCompactor, type ProxyOutcome } from '../../service/proxy/compactor.js'
import { storedAnchors } from '../../service/proxy/conversations.js'
import { ClearingTier } from '../../proxy/clearing.js'
import { promptTokens } from '../../compaction/index.js'
import { Upstream } from '../../proxy/upstream.js'
import { type Config, DEFAULT_GEMINI_BASE_URL, DEFAULT_OPENAI_BASE_URL, parseApiKeys, proxySummaries } from '../config.js'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ClientSummaries } from '../../proxy/client-summaries.js'
import type { ProxyContext } from '../proxy/forward.js'
import { ProxyService } from '../../service/proxy/requests.js'
import { RecallExchanges } from '../../service/proxy/recall-exchanges.js'
import { warnSummarizerFault } from '../../service/served.js'
import { DEFAULT_UPSTREAM_URL } from '../../contract/defaults.js'
import { ITEM_SECRET_STATE, ItemSeals } from '../../service/item-seals.js'
import type { KeyMaterial } from '../../storage/keyring.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** upstream: the Messages API's; openai: the OpenAI-compatible API's (Chat Completions, Responses). */
    /** policy: each proxy's budget, credentials and who performs context management (its routes read it here). */
    proxy: {
      upstream: Upstream
      openai: Upstream
      gemini: Upstream
      compactor: ProxyCompactor
      clearing: ClearingTier | undefined
      policy: ProxyPolicies
      /** Each proxied request made ready to forward (service/proxy/requests.ts). */
      service: ProxyService
      /** What the upstream saw in place of answers where the model called the recall tool. */
      exchanges: RecallExchanges
    }
  }
  interface FastifyRequest {
    /** What the proxy did to this request's history (counted when it is answered); null until it is decided. */
    proxyOutcome: ProxyOutcome['kind'] | null
  }
}

/** What each proxy forwards with and who performs its context management, from the settings. */
export interface ProxyPolicies {
  messages: ProxyContext
  openai: ProxyContext
  gemini: ProxyContext
}

/** How many cleared results' keys a process remembers (the oldest forgotten first: one forgotten is kept again, a duplicate passage). */
const CLEARED_KEPT = 100_000

/** A set that forgets its oldest member past `max`. */
export class SeenSet {
  private readonly seen = new Set<string>()
  constructor(private readonly max: number) {}

  has(key: string): boolean {
    return this.seen.has(key)
  }

  add(key: string): void {
    this.seen.add(key)
    if (this.seen.size > this.max) {
      const oldest = this.seen.values().next()
      if (!oldest.done) this.seen.delete(oldest.value)
    }
  }
}

/** The proxy's upstream clients and its per-session compactor (anchors, summaries written ahead), one for every API it proxies. */
export const proxyPlugin = fp<{ config: Config; keys: KeyMaterial }>(
  async (app, { config, keys }) => {
    const { metrics } = app
    const timeouts = { timeoutMs: config.COMPACT_UPSTREAM_TIMEOUT_MS, connections: config.COMPACT_UPSTREAM_CONNECTIONS }
    const upstream = new Upstream({ baseUrl: config.ANTHROPIC_BASE_URL ?? DEFAULT_UPSTREAM_URL, ...timeouts })
    const openai = new Upstream({ baseUrl: config.OPENAI_BASE_URL ?? DEFAULT_OPENAI_BASE_URL, name: 'the OpenAI API', ...timeouts })
    const gemini = new Upstream({ baseUrl: config.GOOGLE_GEMINI_BASE_URL ?? DEFAULT_GEMINI_BASE_URL, name: "Gemini's API", ...timeouts })
    const compactor = proxyCompactor(app, config)
    // clearing first (COMPACT_STRATEGY clear or hybrid), landing where the compactor's crossings land
    const clearing =
      config.COMPACT_STRATEGY === 'summarize'
        ? undefined
        : new ClearingTier(config.COMPACT_STRATEGY, (parts, budgetTokens) => {
            const fixed = promptTokens([], parts.system, parts.tools)
            return fixed + Math.floor(config.COMPACT_TARGET_SHARE * Math.max(0, budgetTokens - fixed))
          })
    const policy = proxyPolicies(config)
    const exchanges = new RecallExchanges(app.store, (err: unknown) => {
      metrics.storeErrors.inc({ operation: 'recall_exchanges' })
      app.log.error({ err, event: 'recall_exchanges_not_kept' }, "a conversation's recall exchanges could not be read or kept; the proxy goes on from memory")
    })
    const service = new ProxyService({
      compactor,
      clearing,
      clearedKept: new SeenSet(CLEARED_KEPT),
      serve: (run, at) => app.compaction.service.serve(run, at),
      activity: app.activity,
      metrics,
      store: app.store,
      exchanges,
      items: new ItemSeals(keys, (fresh) => app.store.firstState(ITEM_SECRET_STATE, fresh)),
      clearedMemory: (uses) => app.compaction.service.clearedMemory(uses)
    })
    app.decorate('proxy', { upstream, openai, gemini, compactor, clearing, policy, service, exchanges })
    app.addHook('preClose', async () => compactor.close())
    app.addHook('onClose', async () => {
      await Promise.all([upstream.close(), openai.close(), gemini.close()])
    })
  },
  { name: 'proxy', dependencies: ['metrics', 'compaction', 'store'] }
)

/** The proxy's per-conversation compactor: its crossings run where the app runs compactions, its summaries written ahead within the model's places, its anchors in the store. */
function proxyCompactor(app: FastifyInstance, config: Config): ProxyCompactor {
  const { metrics } = app
  const { deps, limited } = app.compaction
  return new ProxyCompactor({
    deps,
    runCrossing: (input, context, model) => app.compaction.service.run(input, context, model),
    precomputeAt: config.COMPACT_PRECOMPUTE_AT === 'off' ? undefined : config.COMPACT_PRECOMPUTE_AT,
    targetShare: config.COMPACT_TARGET_SHARE,
    ...(config.COMPACT_PROMPT_CACHE_S === 'off' ? {} : { promptCacheMs: config.COMPACT_PROMPT_CACHE_S * 1_000 }),
    // what a crossing's rewrite costs and saves, as the operator prices them (COMPACT_PRICE_*)
    ...(config.COMPACT_PRICE_INPUT > 0
      ? {
          prices: {
            cache_write: config.COMPACT_PRICE_CACHE_WRITE / config.COMPACT_PRICE_INPUT,
            cache_read: config.COMPACT_PRICE_CACHE_READ / config.COMPACT_PRICE_INPUT
          }
        }
      : {}),
    onWait: () => metrics.proxyCrossingsWaited.inc(),
    // Background summaries take a free place only: they never queue ahead of a client's.
    canPrecompute: (inFlight) => {
      // as many at once as the gateway's model would take (the conversation's own pass no limiter of the gateway's)
      if (inFlight >= config.COMPACT_MAX_SUMMARIES) return false
      if (!limited) return true
      const { load } = limited
      return load.waiting === 0 && load.active < config.COMPACT_MAX_SUMMARIES
    },
    onPrecompute: (event, err) => {
      metrics.proxyPrecomputes.inc({ event })
      if (err) app.log.warn({ err, event: 'precompute_failed' }, 'a background summary failed')
    },
    anchors: storedAnchors(app.store),
    onSummary: (request, report) => {
      app.activity.summary(request.keyName, request.session, report)
      // a summary written ahead that fell back: the model fails, and the crossings will merge without it
      warnSummarizerFault(app.compaction.faults, app.log, report.fallback_reason, {
        key_name: request.keyName || undefined,
        session_id: request.session,
        summarizer_calls: report.calls,
        via: 'write_ahead'
      })
    },
    onAnchorFault: (err) => {
      metrics.storeErrors.inc({ operation: 'anchors' })
      app.log.error({ err, event: 'anchors_not_kept' }, "a conversation's anchors could not be read or kept; the proxy goes on from memory")
    }
  })
}

/** Each proxy's policy from the settings: its budget and limit, credentials, context management, recall, who writes its summaries, the control group. */
function proxyPolicies(config: Config): ProxyPolicies {
  // whether the gateway checks keys of its own: the client's key is then never forwarded
  const checksKeys = parseApiKeys(config.COMPACT_API_KEYS).size > 0
  const budgetTokens = config.COMPACT_BUDGET
  // a hard bound over the budget, which is then a target (COMPACT_LIMIT)
  const limit = config.COMPACT_LIMIT === 'off' ? {} : { limitTokens: config.COMPACT_LIMIT }
  // The conversation's own model writes its summaries (COMPACT_PROXY_SUMMARIES), asked in the conversation with
  // the credentials it is forwarded with (the client's, or the gateway's key): the prefix is read from the cache.
  const clientSummaries: ClientSummaries | undefined =
    proxySummaries(config) === 'conversation'
      ? {
          baseUrl: config.ANTHROPIC_BASE_URL ?? DEFAULT_UPSTREAM_URL,
          openAiBaseUrl: config.OPENAI_BASE_URL ?? DEFAULT_OPENAI_BASE_URL,
          geminiBaseUrl: config.GOOGLE_GEMINI_BASE_URL ?? DEFAULT_GEMINI_BASE_URL,
          timeoutMs: config.COMPACT_SUMMARIZER_TIMEOUT_MS,
          fallback: config.COMPACT_FALLBACK
        }
      : undefined
  // the share of new conversations sent through uncompacted, to measure what compaction saves
  const control = config.COMPACT_CONTROL_SHARE > 0 ? { controlShare: config.COMPACT_CONTROL_SHARE } : {}
  return {
    messages: {
      budgetTokens,
      ...limit,
      ...control,
      credentials: upstreamCredentials(config.ANTHROPIC_API_KEY, checksKeys),
      contextManagement: contextManagement(config),
      recall: config.COMPACT_RECALL,
      ...(clientSummaries ? { clientSummaries } : {})
    },
    openai: {
      budgetTokens,
      ...limit,
      ...control,
      credentials: openAiCredentials(config.OPENAI_API_KEY, checksKeys),
      contextManagement: openAiContextManagement(config),
      recall: config.COMPACT_RECALL,
      ...(clientSummaries ? { clientSummaries } : {})
    },
    gemini: {
      budgetTokens,
      ...limit,
      ...control,
      recall: config.COMPACT_RECALL,
      credentials: geminiCredentials(config.GEMINI_API_KEY, checksKeys),
      ...(clientSummaries ? { clientSummaries } : {})
    }
  }
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
