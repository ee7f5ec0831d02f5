/**
 * Summaries written ahead of a proxied conversation's crossing, in the background: timed by the
 * conversation's pace (how much a request adds, how far apart requests come) so that one begins only when the
 * crossing is near, one at a time per conversation, within the summary places free; one that comes after its
 * crossing is the base of the next crossing's merge. The crossing itself never waits for one
 * (compactor.ts).
 */
import { type Message, compactsByItself } from '../../compaction/index.js'
import { type Anchor, anchorOf, holds, withAnchor } from '../../proxy/anchors.js'
import type { Summarizer } from '../../summarizer/summarizer.js'
import type { CompactResponseBody, CompactRun, CompactionInput, RunContext, Summarized } from '../compact.js'
import type { ProxyCompactorOptions, ProxyRequest } from './compactor.js'
import type { ConversationState, Pending } from './conversations.js'

export function isCompacted(run: CompactRun): run is CompactRun & { response: Summarized<CompactResponseBody> } {
  return run.response.compacted
}

/** The summary written ahead for this history, when it still holds and goes further than the current one. */
export function pendingFor(state: ConversationState, messages: readonly Message[]): Pending | undefined {
  const { pending, current } = state
  return pending && holds(pending, messages) && pending.cut > (current?.cut ?? 0) ? pending : undefined
}

/** Weight of the newest observation in a moving average of a conversation's pace. */
const PACE_WEIGHT = 0.5
/** What a summary is assumed to take before one has been timed here. */
const FIRST_SUMMARY_MS = 10_000
/** A summary is written ahead at most this many requests before the crossing it is for (fewer where turns are slower than summaries). */
const MAX_LEAD_REQUESTS = 3

const average = (prior: number | undefined, value: number): number => (prior === undefined ? value : prior + PACE_WEIGHT * (value - prior))

export interface WriteAheadOptions extends Pick<ProxyCompactorOptions, 'precomputeAt' | 'canPrecompute' | 'onPrecompute' | 'onSummary'> {
  /** The gateway has a summary model of its own (else only a conversation's own model writes ahead). */
  hasModel: boolean
  /** Keeps a conversation's anchors (a summary written ahead, or the base of the next merge). */
  persist: (state: ConversationState) => void
  /** The tail a compaction written ahead keeps, the turns until the crossing being kept too (`grownSince` tokens of room fewer). */
  keep: (request: ProxyRequest, grownSince: number, base: Anchor | undefined) => number | undefined
  /** The body of a compaction of `input`, keeping `keep`. */
  body: (request: ProxyRequest, input: Message[], keep: number | undefined) => CompactionInput
  /** Runs it where the compactor runs its compactions, by `model` where given. */
  run: (body: CompactionInput, context: RunContext, model?: Summarizer) => Promise<CompactRun>
}

export class WriteAhead {
  /** Summaries being written ahead. */
  private readonly summaries = new Set<Promise<void>>()
  private closed = false
  /** Ends the background summaries still waiting for a model when the compactor closes. */
  private readonly closing = new AbortController()
  /** How long a summary written ahead took here (a moving average): how far ahead the next one begins. */
  private summaryMs = FIRST_SUMMARY_MS

  constructor(private readonly options: WriteAheadOptions) {}

  /** Notes how the conversation grows: the estimate of each request under the anchor, and the time between requests. */
  observe(state: ConversationState, tokens: number): void {
    const now = performance.now()
    const prior = state.pace
    if (!prior || tokens < prior.tokens) {
      // a first request, or one after a crossing (the history shrank): the averages go on from here
      state.pace = { ...prior, tokens, at: now }
      return
    }
    state.pace = { tokens, at: now, growth: average(prior.growth, tokens - prior.tokens), interval: average(prior.interval, now - prior.at) }
  }

  /**
   * The compaction the next crossing would make is written ahead, only when the crossing is near: the
   * conversation's growth per request, over as many requests as a summary takes at its pace (at most
   * MAX_LEAD_REQUESTS), would carry it past the budget. Never before `precomputeAt` of the budget, never two
   * at once, never again for the same crossing: a summary made far from the crossing is one a conversation
   * that stops short of it pays for and never uses.
   */
  maybe(state: ConversationState, request: ProxyRequest, tokens: number, forwarded: Message[]): void {
    const { precomputeAt, hasModel } = this.options
    const { budgetTokens, messages } = request
    if (this.closed || precomputeAt === undefined || budgetTokens === 'off' || !(request.clientSummarizer || hasModel) || state.working) return
    if (tokens < precomputeAt * budgetTokens || pendingFor(state, messages)) return
    // a client that compacts by itself will not use a summary written ahead
    if (compactsByItself(messages)) return
    const { growth, interval } = state.pace ?? {}
    if (growth === undefined || interval === undefined || growth <= 0) return
    const lead = Math.min(MAX_LEAD_REQUESTS, Math.max(1, Math.ceil(this.summaryMs / Math.max(1, interval))))
    if (tokens + lead * growth < budgetTokens) return
    if (!this.options.canPrecompute(this.summaries.size)) return this.options.onPrecompute('skipped')
    const current = state.current
    const base = holds(state.refined, messages) ? state.refined : current
    const input = base ? withAnchor(base, messages) : messages
    this.options.onPrecompute('started')
    const started = performance.now()
    this.track(state, async () => {
      // Written ahead of the crossing, it keeps less: the turns until the crossing will be kept too.
      const keep = this.options.keep(request, budgetTokens - tokens, base)
      // the conversation's own model, in the conversation as forwarded (COMPACT_PROXY_SUMMARIES), else the gateway's
      const run = await this.options.run(
        this.options.body(request, input, keep),
        { keyName: request.keyName, recallTool: request.recall ?? false, signal: this.closing.signal, clipToBudget: true },
        request.clientSummarizer?.(forwarded)
      )
      this.summaryMs = average(this.summaryMs, performance.now() - started)
      const report = run.response.summarizer
      if (report && report.calls > 0) this.options.onSummary?.(request, report)
      if (!isCompacted(run) || state.forgotten || this.closed) return
      const anchor = anchorOf(run.response, messages, base)
      const { messages: _sent, ...response } = run.response
      if (anchor.cut > (state.current?.cut ?? 0)) {
        state.pending = { ...anchor, atTokens: tokens, run: { ...run, response } }
        this.options.persist(state)
        this.options.onPrecompute('done')
        return
      }
      // A crossing came first: the model's summary of the first `cut` messages is the base of the next one's merge.
      if (!state.refined || anchor.cut >= state.refined.cut) {
        state.refined = { cut: anchor.cut, prefixHash: anchor.prefixHash, head: anchor.head, summaryId: anchor.summaryId }
        this.options.persist(state)
      }
      this.options.onPrecompute('late')
    })
  }

  /** Runs background work for the conversation, one at a time. */
  private track(state: ConversationState, work: () => Promise<void>): void {
    const job = work()
      .catch((err: unknown) => this.options.onPrecompute('failed', err))
      .finally(() => {
        if (state.working === job) state.working = undefined
        this.summaries.delete(job)
      })
    state.working = job
    this.summaries.add(job)
  }

  /** The summaries being written now. */
  get inFlight(): Promise<void>[] {
    return [...this.summaries]
  }

  /** No new summary; those still waiting for a model are given up (a crossing never needs one). */
  close(): void {
    this.closed = true
    this.closing.abort()
  }
}
