import {
  type RecallNaming,
  CARRIED_SHARE,
  type Message,
  SUMMARY_FLOOR_TOKENS,
  SUMMARY_SHARE,
  type SystemPrompt,
  asksProviderCompaction,
  carriedContext,
  carriedTokens,
  holdsThinking,
  promptTokens
} from '../../compaction/index.js'
import type { MemoryEntry } from '../../memory/entries.js'
import type { Summarizer } from '../../summarizer/summarizer.js'
import type { CompactRequestBody } from '../../contract/schemas.js'
import type { CrossingTiming } from '../../storage/store.js'
import {
  type CompactDeps,
  type CompactResponseBody,
  type CompactRun,
  type CompactionInput,
  type ResponseView,
  type RunContext,
  type Summarized,
  runCompaction
} from '../compact.js'
import { type Anchor, type ForwardedTail, anchorOf, anchoredTail, holds, withAnchor } from '../../proxy/anchors.js'
import { type CachePrices, crossingCall, requestsOf } from '../../compaction/payback.js'
import { LAPSED_CACHE_SHARE, DEFAULT_PROMPT_CACHE_S } from '../../contract/defaults.js'
import { type ConversationState, type Pending, ProxyConversations, type ProxyConversationsOptions } from './conversations.js'
import { WriteAhead, isCompacted, pendingFor } from './write-ahead.js'
import { PRICE } from '../costs.js'

/** How far past the target share of the room a crossing may land with a summary written ahead, taken as it is. */
const LANDING_SLACK = 0.1
/** A summary built on another is taken to be this much larger than it, where the cut is aimed. */
const SUMMARY_GROWTH = 1.25
/** The least tail a proxied compaction keeps (keep_tokens' own floor). */
const MIN_KEEP_TOKENS = 100

export interface ProxyRequest {
  messages: Message[]
  system?: CompactRequestBody['system']
  tools?: CompactRequestBody['tools']
  /** The API key's name ('' without auth): anchors and summaries are never shared across tenants. */
  keyName: string
  /** The client's session (x-compaction-session or metadata.user_id): records and the cold layer are kept under it. */
  session?: string
  budgetTokens: number | 'off'
  /** What the client adds to the doctrine for its summaries (compact_20260112's `instructions`). */
  instructions?: string
  signal?: AbortSignal
  /**
   * The conversation's own model (COMPACT_PROXY_SUMMARIES), asked in the conversation (`messages`: as they
   * are forwarded): it writes the conversation's summaries, ahead and at the crossing.
   */
  clientSummarizer?: (messages: Message[]) => Summarizer
  /** The model checks each thinking block against its prefix: the kept turns' stale thinking is taken out (compaction/thinking.ts). */
  unbindThinking?: boolean
  /**
   * The client asked for this compaction and waits for it (compact_20260112): a crossing is summarized by a
   * model while it waits, the gateway's, else `model` (the client's own, given the history it summarizes).
   */
  explicit?: { model?: (messages: Message[]) => Summarizer }
  /** The recall tool the conversation's model has (COMPACT_RECALL): the summary note names it, else none. */
  recall?: RecallNaming
  /**
   * The hard bound over the gateway's own budget (COMPACT_LIMIT), which is then a target: a crossing waits,
   * forwarded uncompacted, while a compaction would not pay back (compaction/payback.ts), never past this.
   */
  limitTokens?: number
}

/** The prompt's tokens when `messages` are sent with the request's system prompt and tools. */
function requestTokens(request: ProxyRequest, messages: Message[]): number {
  return promptTokens(messages, request.system as SystemPrompt | undefined, request.tools)
}

/** What the proxy forwards: the body as it came, or with its messages replaced. */
export type ProxyOutcome =
  /** Forwarded as it came; `tokens` is its estimate, undefined for a body forwarded unread (far under the budget). */
  | { kind: 'none'; tokens: number | undefined }
  /** An earlier compaction's summary stands in for the turns it compacted; nothing new was summarized. */
  | ({ kind: 'reused'; tokens: number; messages: Message[]; summaryId: string } & ForwardedTail)
  | ({
      kind: 'compacted'
      tokens: number
      messages: Message[]
      summaryId: string
      /**
       * precomputed: a summary written ahead in the background, taken as it was; merged: the best summary at
       * hand (one written ahead, a model's of an earlier cut, or the current one) merged with the turns since
       * from the ledger. A crossing never waits for a model: there is no third way.
       */
      source: 'precomputed' | 'merged'
      /** The prompt's estimate before the crossing (what crossed the budget); `tokens` is what is forwarded. */
      crossed: number
      /** Under a limit (COMPACT_LIMIT): why the crossing was made then, after how many requests over the budget. */
      timing?: CrossingTiming
      /** The compaction as it is recorded and counted (its messages are the ones above). */
      run: CompactRun<Summarized<ResponseView>>
      /** The cold layer of everything this compaction removed. */
      memory: MemoryEntry[] | undefined
    } & ForwardedTail)

/** started, done, failed, skipped (no free place); late: done after its crossing, kept as the base of the next merge. */
export type PrecomputeEvent = 'started' | 'done' | 'failed' | 'skipped' | 'late'

/** The compactor's settings; those of its conversations (their anchors' store, clock and count) are ProxyConversationsOptions. */
export interface ProxyCompactorOptions extends ProxyConversationsOptions {
  deps: CompactDeps
  /**
   * How a crossing's compaction runs (its summary is the ledger's, merged with the best at hand): where the
   * app's compactions run (a large one in a worker, service/compactions.ts: Compactions.run); inline by default.
   */
  runCrossing?: (body: CompactionInput, context: RunContext, model?: Summarizer) => Promise<CompactRun>
  /**
   * The least share of the budget from which a conversation's next summary may be written ahead (once its
   * growth says the crossing is near); undefined: never, and crossings merge from the ledger alone.
   */
  precomputeAt: number | undefined
  /** Whether a background summary may start now, `inFlight` being written ahead already (the summary limiter has a free place). */
  canPrecompute: (inFlight: number) => boolean
  onPrecompute: (event: PrecomputeEvent, err?: unknown) => void
  /** After a crossing the context lands at this share of the room between system + tools and the budget; undefined: keep_tokens' default. */
  targetShare?: number
  /**
   * How long the upstream's prompt cache lasts without a request (COMPACT_PROMPT_CACHE_S); undefined: never
   * compacted for it. A conversation past LAPSED_CACHE_SHARE of its budget that comes back later than this is
   * compacted then, its prefix being written again anyway (one replica's own requests only: where replicas
   * share the anchors, another may have kept the cache warm).
   */
  promptCacheMs?: number
  /** The prompt cache's prices as multiples of an input token's (COMPACT_PRICE_*): what a crossing's rewrite costs and saves. */
  prices?: CachePrices
  /** A crossing that waited: forwarded over its budget, uncompacted, for it would not have paid back. */
  onWait?: () => void
  /** A summary written ahead for a session's conversation, with what its model calls took (used or not). */
  onSummary?: (request: ProxyRequest, report: NonNullable<Summarized<CompactResponseBody>['summarizer']>) => void
}

/** A crossing made because the prompt cache lapsed: recorded with that reason. */
function cacheLapsed(outcome: ProxyOutcome): ProxyOutcome {
  if (outcome.kind !== 'compacted') return outcome
  return { ...outcome, run: { ...outcome.run, response: { ...outcome.run.response, reason: 'cache_lapsed' } } }
}

/** A compaction's tail in the client's indices: it compacted the client's messages, or them behind an earlier summary (the anchor knows the cut). */
function forwardedTail(response: Summarized<CompactResponseBody>, anchor: Anchor): ForwardedTail {
  const shift = anchor.cut - response.kept_from
  return { keptFrom: anchor.cut, clips: response.clips.map((clip) => ({ ...clip, message_index: clip.message_index + shift })) }
}

/**
 * Compaction for a proxy whose clients keep sending their whole history. Per conversation it remembers the
 * summary that stands for the history's first turns (an anchor), so that each request sends the same
 * summary turn and the raw turns since; only when that is over the budget is a new compaction made.
 *
 * A crossing never waits for a model: it takes the summary written ahead if one is ready, else merges the
 * best summary at hand with the turns since from the ledger (no model call). A model's summary is written in
 * the background only when the conversation's growth says the crossing is near (so that it is used), one at
 * a time; one that comes after its crossing is the base of the next crossing's merge, so none is wasted.
 */
export class ProxyCompactor {
  /** The conversations remembered, their anchors kept in the store. */
  private readonly conversations: ProxyConversations
  /** The summaries written ahead of the crossings, and the conversations' pace they are timed by. */
  private readonly writeAhead: WriteAhead

  constructor(private readonly options: ProxyCompactorOptions) {
    this.conversations = new ProxyConversations(options)
    const { precomputeAt, canPrecompute, onPrecompute, onSummary } = options
    this.writeAhead = new WriteAhead({
      precomputeAt,
      canPrecompute,
      onPrecompute,
      ...(onSummary ? { onSummary } : {}),
      hasModel: options.deps.modelSummarizer !== undefined,
      persist: (state) => this.conversations.persist(state),
      keep: (request, grownSince, base) => this.crossingKeep(request, grownSince, base),
      body: (request, input, keep) => this.body(request, input, 'manual', 'auto', keep),
      run: (body, context, model) => this.crossing(body, context, model)
    })
  }

  async prepare(request: ProxyRequest): Promise<ProxyOutcome> {
    const state = this.conversations.stateOf(request)
    if (this.options.anchors) await this.conversations.load(state)
    const outcome = this.decide(state, request)
    // Another replica may take the conversation's next request: what this one decided is saved first.
    if (this.options.anchors?.shared) await state.saving
    return outcome
  }

  private decide(state: ConversationState, request: ProxyRequest): Promise<ProxyOutcome> | ProxyOutcome {
    const { messages, budgetTokens } = request
    // the client's own compaction (Codex's compaction_trigger): the upstream is asked to compact what the client sent, as sent
    if (asksProviderCompaction(messages)) return { kind: 'none', tokens: requestTokens(request, messages) }
    if (state.current && !holds(state.current, messages)) {
      // The client's history is not the one summarized (it was edited, or this is another conversation).
      this.conversations.reset(state)
      this.conversations.persist(state)
    }
    const current = state.current
    // an anchor kept before its bound was (an earlier build's): every kept turn sent so far is taken as stale,
    // which the check accepts, and the thinking from now on stays
    if (current && current.bound === undefined && request.unbindThinking) {
      current.bound = messages.length
      this.conversations.persist(state)
    }
    const anchored = current ? anchoredTail(current, messages, request.unbindThinking) : undefined
    const effective = anchored ? anchored.messages : messages
    const tokens = requestTokens(request, effective)
    this.writeAhead.observe(state, tokens)
    // What is sent when nothing new is compacted: the current summary and the turns since (clipped as the
    // crossing clipped them), or the body as it came.
    const unchanged: ProxyOutcome =
      current && anchored
        ? { kind: 'reused', tokens, messages: effective, summaryId: current.summaryId, keptFrom: current.cut, clips: anchored.clips }
        : { kind: 'none', tokens }
    const lapsed = budgetTokens !== 'off' && tokens <= budgetTokens && this.cacheLapsed(state, tokens, budgetTokens)
    if ((budgetTokens === 'off' || tokens <= budgetTokens) && !lapsed) {
      this.writeAhead.maybe(state, request, tokens, effective)
      return unchanged
    }
    // Over a budget that is a target: the crossing waits while it would not pay back, up to the limit.
    const timing = lapsed ? undefined : this.timing(state, request, tokens, budgetTokens)
    if (timing === 'wait') {
      state.waited = (state.waited ?? 0) + 1
      this.options.onWait?.()
      this.writeAhead.maybe(state, request, tokens, effective)
      return unchanged
    }
    // Over the budget (or back after the cache lapsed): a summary written ahead is taken at once; one still
    // being written is not waited for.
    const pending = pendingFor(state, messages)
    const crossing = pending ? this.fromPending(state, request, pending, tokens, unchanged) : this.merge(state, request, tokens, unchanged, lapsed)
    if (timing) return crossing.then((outcome) => (outcome.kind === 'compacted' ? { ...outcome, timing } : outcome))
    return lapsed ? crossing.then(cacheLapsed) : crossing
  }

  /**
   * Where the budget is a target under a limit (the request's `limitTokens`): whether this crossing waits, else
   * why it is made now (and how many requests it waited). Undefined where there is no limit over the budget.
   */
  private timing(state: ConversationState, request: ProxyRequest, tokens: number, budget: number): CrossingTiming | 'wait' | undefined {
    const limit = request.limitTokens
    if (limit === undefined || limit <= budget) return undefined
    const fixed = requestTokens(request, [])
    const call = crossingCall({
      tokens,
      limit,
      // what a crossing leaves: the system prompt and tools, and the target share of the room beside them
      keptTokens: Math.min(tokens, fixed + Math.floor((this.options.targetShare ?? 0.5) * Math.max(0, budget - fixed))),
      requestsSoFar: requestsOf(request.messages.length),
      ...(state.pace?.growth !== undefined ? { growth: state.pace.growth } : {}),
      ...(state.pace?.interval !== undefined ? { intervalMs: state.pace.interval } : {}),
      cacheMs: this.options.promptCacheMs ?? DEFAULT_PROMPT_CACHE_S * 1_000,
      prices: this.options.prices ?? PRICE
    })
    if (call.kind === 'wait') return 'wait'
    const waited = state.waited ?? 0
    state.waited = 0
    return { because: call.because, waited_requests: waited, limit_tokens: limit }
  }

  /** Whether the conversation, past LAPSED_CACHE_SHARE of its budget, comes back after the prompt cache's life: compacted now, at no extra cache write. */
  private cacheLapsed(state: ConversationState, tokens: number, budget: number): boolean {
    const { promptCacheMs, anchors } = this.options
    if (promptCacheMs === undefined || state.previousAt === undefined || anchors?.shared) return false
    return tokens > LAPSED_CACHE_SHARE * budget && state.seenAt - state.previousAt > promptCacheMs
  }

  /**
   * The crossing with no summary written ahead: the best summary at hand (a model's of an earlier cut, or the
   * current one) merged with the turns since from the ledger, at once.
   */
  private async merge(state: ConversationState, request: ProxyRequest, crossed: number, unchanged: ProxyOutcome, underBudget = false): Promise<ProxyOutcome> {
    const { messages } = request
    const current = state.current
    const base = holds(state.refined, messages) ? state.refined : current
    const input = base ? withAnchor(base, messages) : messages
    // (a history under its budget is compacted only where it is asked to be: the cache lapsed)
    const run = await this.summarized(request, this.body(request, input, underBudget ? 'manual' : 'auto', 'extractive', this.crossingKeep(request, 0, base)))
    if (!isCompacted(run)) {
      // The model's summary of an earlier cut is shorter: sent from now on, it is all this history needs (the
      // prefix changes once, as a compaction would change it). Else nothing could be compacted.
      if (base !== undefined && base !== current) {
        const again = anchoredTail(this.adopt(state, base, messages.length), messages, request.unbindThinking)
        return {
          kind: 'reused',
          tokens: requestTokens(request, again.messages),
          messages: again.messages,
          summaryId: base.summaryId,
          keptFrom: base.cut,
          clips: again.clips
        }
      }
      return unchanged
    }
    const anchor = this.adopt(state, anchorOf(run.response, messages, base), messages.length)
    const forwarded = { ...run, response: { ...run.response, stats: { ...run.response.stats, raw_history_tokens: crossed } } }
    return {
      kind: 'compacted',
      tokens: run.response.stats.context_after_compaction,
      crossed,
      messages: this.sent(request, anchor, run.response.messages),
      summaryId: anchor.summaryId,
      source: 'merged',
      run: forwarded,
      memory: run.memory,
      ...forwardedTail(run.response, anchor)
    }
  }

  /** The crossing, with a summary written ahead: taken as it is where it lands near the target, else merged with the turns since. */
  private async fromPending(state: ConversationState, request: ProxyRequest, pending: Pending, before: number, unchanged: ProxyOutcome): Promise<ProxyOutcome> {
    const { messages, budgetTokens } = request
    const { messages: anchored, clips } = anchoredTail(pending, messages)
    const tokens = requestTokens(request, anchored)
    const taken = (): ProxyOutcome => {
      const adopted = this.adopt(state, pending, messages.length)
      // The figures are those of what is forwarded now, not of the history the summary was written from.
      const written = pending.run.response
      const fixed = requestTokens(request, [])
      const stats = {
        ...written.stats,
        raw_history_tokens: before,
        context_after_compaction: tokens,
        kept_messages: messages.length - pending.cut,
        kept_tokens: Math.max(0, tokens - fixed - written.stats.summary_tokens - written.stats.carried_context_tokens)
      }
      const run = { ...pending.run, response: { ...written, reason: 'over_budget' as const, stats } }
      return {
        kind: 'compacted',
        tokens,
        crossed: before,
        messages: this.sent(request, adopted, anchored),
        summaryId: pending.summaryId,
        source: 'precomputed',
        run,
        memory: pending.run.memory,
        keptFrom: pending.cut,
        clips
      }
    }
    // Taken as it is where it lands near the target; past it (a summary written long before the crossing
    // leaves more turns since than the target holds), the turns since are merged in to land there.
    if (budgetTokens === 'off' || tokens <= this.landingBound(request)) return taken()
    // The anchored merge: the precomputed summary is the prior, the turns since come from the ledger (a
    // history under the budget but past the landing is compacted as a /compact would: manual).
    const mode = tokens > budgetTokens ? 'auto' : 'manual'
    const run = await this.summarized(request, this.body(request, withAnchor(pending, messages), mode, 'extractive', this.crossingKeep(request, 0, pending)))
    // Where nothing more can be compacted, the summary written ahead is taken only if it makes the prompt
    // smaller; else the history is left as it is (what must be kept, the newest item the client cannot read and
    // all after it, is more than the budget holds either way).
    if (!isCompacted(run)) return tokens < before ? taken() : unchanged
    const anchor = this.adopt(state, anchorOf(run.response, messages, pending), messages.length)
    const memory = [...(pending.run.memory ?? []), ...(run.memory ?? [])]
    const forwarded = { ...run, response: { ...run.response, stats: { ...run.response.stats, raw_history_tokens: before } } }
    return {
      kind: 'compacted',
      tokens: run.response.stats.context_after_compaction,
      crossed: before,
      messages: this.sent(request, anchor, run.response.messages),
      summaryId: anchor.summaryId,
      source: 'merged',
      run: forwarded,
      memory: memory.length > 0 ? memory : undefined,
      ...forwardedTail(run.response, anchor)
    }
  }

  /**
   * A crossing's compaction: merged from the ledger at once (a crossing waits for no model), or, where the
   * client asked for it and waits (request.explicit), summarized by a model.
   */
  private summarized(request: ProxyRequest, body: CompactionInput): Promise<CompactRun> {
    const context: RunContext = { keyName: request.keyName, signal: request.signal, recallTool: request.recall ?? false, clipToBudget: true }
    if (!request.explicit) return this.crossing(body, context)
    return this.explicit({ ...body, summarizer: 'auto' }, context, request.explicit.model?.(body.messages as Message[]))
  }

  /**
   * A compaction the client asked for and waits for (compaction on demand): by `model` where given (the
   * conversation's own, in the conversation: COMPACT_PROXY_SUMMARIES), else the gateway's model, else extractive.
   */
  explicit(body: CompactionInput, context: RunContext, model?: Summarizer): Promise<CompactRun> {
    return this.crossing(body, context, model)
  }

  /**
   * A crossing's compaction, run where the app runs them (options.runCrossing), else here; a summary by `model`
   * where given (the conversation's own), else by the gateway's model.
   */
  private crossing(body: CompactionInput, context: RunContext, model?: Summarizer): Promise<CompactRun> {
    const { deps, runCrossing } = this.options
    if (runCrossing) return runCrossing(body, context, model)
    return runCompaction(body, model ? { ...deps, modelSummarizer: model } : deps, context)
  }

  /** The anchor sent from now on, first forwarded with the client's `bound` messages. */
  private adopt(state: ConversationState, anchor: Anchor, bound: number): Anchor {
    this.conversations.reset(state)
    const current = {
      cut: anchor.cut,
      prefixHash: anchor.prefixHash,
      head: anchor.head,
      summaryId: anchor.summaryId,
      ...(anchor.clipped ? { clipped: anchor.clipped } : {}),
      bound
    }
    state.current = current
    this.conversations.persist(state)
    return current
  }

  /**
   * A crossing's messages as forwarded: as compacted, or, where the model checks thinking against its prefix
   * and the kept turns hold thinking, as every later request re-applies the anchor (their thinking taken out).
   */
  private sent(request: ProxyRequest, anchor: Anchor, compacted: Message[]): Message[] {
    if (!request.unbindThinking || !holdsThinking(request.messages, anchor.cut)) return compacted
    return anchoredTail(anchor, request.messages, true).messages
  }

  private body(
    request: ProxyRequest,
    messages: Message[],
    mode: 'auto' | 'manual',
    summarizer: 'auto' | 'extractive' = 'auto',
    keep = this.crossingKeep(request)
  ): CompactionInput {
    return {
      messages,
      system: request.system,
      tools: request.tools,
      mode,
      budgetTokens: request.budgetTokens,
      summarizer,
      ...(keep !== undefined ? { keepTokens: keep } : {}),
      ...(request.session !== undefined ? { sessionId: request.session } : {}),
      ...(request.instructions !== undefined ? { instructions: request.instructions } : {})
    }
  }

  /** The most a crossing may leave: the target share of the room and a tenth more, never past the budget. */
  private landingBound(request: ProxyRequest): number {
    const { budgetTokens } = request
    if (budgetTokens === 'off') return Infinity
    if (this.options.targetShare === undefined) return budgetTokens
    const fixed = requestTokens(request, [])
    return Math.min(budgetTokens, fixed + Math.ceil((this.options.targetShare + LANDING_SLACK) * (budgetTokens - fixed)))
  }

  /**
   * The raw turns a crossing keeps, so that the context lands at `targetShare` of the room between the
   * system prompt and tools and the budget (the summary's share taken out): the next crossing is half
   * the room away, whatever system and tools take.
   */
  private crossingKeep(request: ProxyRequest, grownSince = 0, base?: Anchor): number | undefined {
    const { budgetTokens } = request
    if (budgetTokens === 'off' || this.options.targetShare === undefined) return undefined
    const room = budgetTokens - requestTokens(request, [])
    // the summary's room: what the summary it builds on takes, and a quarter more for what it adds; a tenth
    // of the budget where there is none yet
    const tenth = Math.max(SUMMARY_FLOOR_TOKENS, Math.floor(budgetTokens / SUMMARY_SHARE))
    const summary = base
      ? Math.min(
          tenth,
          Math.max(SUMMARY_FLOOR_TOKENS, Math.ceil(SUMMARY_GROWTH * promptTokens([{ role: 'user', content: [...base.head.user] }], undefined, undefined)))
        )
      : tenth
    // the context a compaction carries over (system messages, harness context) lands there too
    const carried = carriedTokens(carriedContext(request.messages, Math.floor(budgetTokens / CARRIED_SHARE), 1), 1)
    return Math.max(MIN_KEEP_TOKENS, Math.floor(this.options.targetShare * room) - summary - carried - grownSince)
  }

  /**
   * The share of the budget under which a request needs nothing of the proxy: no compaction, no summary
   * written ahead (whose pace is read from the target share or from precomputeAt, whichever comes first).
   * Where no summary can be written ahead (`precomputeAt` off, or no model to write it: neither the
   * gateway's nor, `clientModel`, the client's), nothing below the budget itself, if the request names its
   * session (`named`): one that names none is read from that share on all the same, for the id its
   * conversation is recorded under (derivedSession) is read from its history.
   */
  quietShare(clientModel: boolean, named: boolean): number {
    const { precomputeAt, targetShare, deps } = this.options
    if (named && (precomputeAt === undefined || (!deps.modelSummarizer && !clientModel))) return 1
    return Math.min(precomputeAt ?? 1, targetShare ?? 1)
  }

  /**
   * Forgets a tenant's session's conversations here (their anchors and summaries written ahead): it is
   * being deleted. Resolves once their anchor writes in flight have landed.
   */
  forget(keyName: string, session: string): Promise<number> {
    return this.conversations.forget(keyName, session)
  }

  /** Conversations remembered now. */
  get size(): number {
    return this.conversations.size
  }

  /** Resolves when the background work in flight now (summaries and anchor writes) is over. */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.writeAhead.inFlight, ...this.conversations.inFlight])
  }

  /** No new background work; summaries still waiting for a model are given up (a crossing never needs one), anchor writes waited for. */
  async close(): Promise<void> {
    this.writeAhead.close()
    await Promise.allSettled(this.conversations.inFlight)
  }
}
