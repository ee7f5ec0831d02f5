import fp from 'fastify-plugin'
import { ProxyCompactor, type ProxyOutcome, storedAnchors } from '../../service/proxy-compactor.js'
import { ClearingTier } from '../../proxy/clearing.js'
import { CLEARED_RECALL_NOTE } from '../../proxy/context-management.js'
import { promptTokens } from '../../compaction/index.js'
import { Upstream } from '../../proxy/upstream.js'
import { type Config, DEFAULT_GEMINI_BASE_URL, DEFAULT_OPENAI_BASE_URL } from '../config.js'
import { DEFAULT_UPSTREAM_URL } from '../../contract/defaults.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** upstream: the Messages API's; openai: the OpenAI-compatible API's (Chat Completions, Responses). */
    /** clearedKept: the tool results cleared by context editing whose output this process has put in the cold layer (tenant, session, call). */
    proxy: { upstream: Upstream; openai: Upstream; gemini: Upstream; compactor: ProxyCompactor; clearedKept: SeenSet; clearing: ClearingTier | undefined }
  }
  interface FastifyRequest {
    /** What the proxy did to this request's history (counted when it is answered); null until it is decided. */
    proxyOutcome: ProxyOutcome['kind'] | null
  }
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
export const proxyPlugin = fp<{ config: Config }>(
  async (app, { config }) => {
    const { metrics } = app
    const { deps, limited } = app.compaction
    const timeouts = { timeoutMs: config.COMPACT_UPSTREAM_TIMEOUT_MS, connections: config.COMPACT_UPSTREAM_CONNECTIONS }
    const upstream = new Upstream({ baseUrl: config.ANTHROPIC_BASE_URL ?? DEFAULT_UPSTREAM_URL, ...timeouts })
    const openai = new Upstream({ baseUrl: config.OPENAI_BASE_URL ?? DEFAULT_OPENAI_BASE_URL, name: 'the OpenAI API', ...timeouts })
    const gemini = new Upstream({ baseUrl: config.GOOGLE_GEMINI_BASE_URL ?? DEFAULT_GEMINI_BASE_URL, name: "Gemini's API", ...timeouts })
    const compactor = new ProxyCompactor({
      deps,
      precomputeAt: config.COMPACT_PRECOMPUTE_AT === 'off' ? undefined : config.COMPACT_PRECOMPUTE_AT,
      targetShare: config.COMPACT_TARGET_SHARE,
      // Background summaries take a free place only: they never queue ahead of a client's.
      canPrecompute: (inFlight) => {
        // the client's own model (no limiter of the gateway's): as many at once as the gateway's would take
        if (!limited) return inFlight < config.COMPACT_MAX_SUMMARIES
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
      },
      onAnchorFault: (err) => {
        metrics.storeErrors.inc({ operation: 'anchors' })
        app.log.error({ err, event: 'anchors_not_kept' }, "a conversation's anchors could not be read or kept; the proxy goes on from memory")
      }
    })
    // clearing first (COMPACT_STRATEGY clear or hybrid), landing where the compactor's crossings land
    const clearing =
      config.COMPACT_STRATEGY === 'summarize'
        ? undefined
        : new ClearingTier(
            config.COMPACT_STRATEGY,
            (parts, budget) => {
              const fixed = promptTokens([], parts.system, parts.tools)
              return fixed + Math.floor(config.COMPACT_TARGET_SHARE * Math.max(0, budget - fixed))
            },
            CLEARED_RECALL_NOTE
          )
    app.decorate('proxy', { upstream, openai, gemini, compactor, clearedKept: new SeenSet(CLEARED_KEPT), clearing })
    app.addHook('preClose', async () => compactor.close())
    app.addHook('onClose', async () => {
      await Promise.all([upstream.close(), openai.close(), gemini.close()])
    })
  },
  { name: 'proxy', dependencies: ['metrics', 'compaction', 'store'] }
)
