/**
 * A proxied request served (the Messages API's, Chat Completions', Responses', Gemini's): the providers' own
 * context management performed, the body read only where it may be compacted, old tool results cleared
 * first where that is the strategy, the history compacted by the proxy's compactor, the compaction served
 * (service/served.ts), and the bytes to forward. Once the upstream has answered: what was done noted (the
 * cleared outputs in the cold layer, the tallies, the request's log fields) and how its answer is relayed.
 * The HTTP layer reads body → service → upstream → reply around it (server/proxy/forward.ts).
 */
import type { IncomingHttpHeaders } from 'node:http'
import type { Transform } from 'node:stream'
import type { BaseLogger } from 'pino'
import { type ClearedUse, CHARS_PER_TOKEN, type Message, PROXY_RECALL_TOOL, type RecallNaming, clearedNote } from '../../compaction/index.js'
import { InvalidRequestError } from '../../contract/errors.js'
import type { ProxiedBody } from '../../proxy/body.js'
import type { ClearingTier } from '../../proxy/clearing.js'
import type { ClientSummaries } from '../../proxy/client-summaries.js'
import {
  compactionBlock,
  fromCompaction,
  onDemandBlock,
  ON_DEMAND_BETA,
  pausedAnswer,
  readOnDemand,
  withAppliedEdits,
  withoutConsumedBetas
} from '../../proxy/context-management.js'
import {
  COMPACTION_KEY,
  CONTEXT_MANAGEMENT_KEY,
  type Managed,
  type ManagedResponses,
  manageContext,
  manageResponses,
  readBackCompaction
} from '../../proxy/managed.js'
import { topLevelField } from '../../proxy/events.js'
import { budgetTokensOf, derivedSession, ownSession, proxySession, readMessagesRequest } from '../../proxy/request.js'
import { OWN_ITEM_KEY, compactedResponse, compactionItem, readBackItems, withCompactionItem } from '../../proxy/responses-compaction.js'
import type { TenantSeal } from '../../proxy/item-seal.js'
import type { ItemSeals } from '../item-seals.js'
import { inControlGroup } from '../control.js'
import { bodyReader, checkCompactValue } from '../../contract/validation.js'
import { ResponsesCompactBody, type ResponsesBody } from '../../contract/proxy-bodies.js'
import type { UpstreamUsage } from '../../proxy/usage.js'
import type { Summarizer } from '../../summarizer/summarizer.js'
import type { Metrics } from '../../telemetry/metrics.js'
import type { ReadYourWrites } from '../../storage/read-your-writes.js'
import type { Activity } from '../activity.js'
import {
  type CompactRun,
  type CompactResponseBody,
  type ResponseView,
  type Summarized,
  type CompactionInput,
  type RunContext,
  compactionInput,
  summarized
} from '../compact.js'
import type { MemoryEntry } from '../../memory/entries.js'
import { type RecallCall, type RecallExchange, type RecallFormat, restoreExchanges } from '../../proxy/recall-tool.js'
import { continuationItems } from '../../proxy/recall-responses.js'
import type { RecallState } from './recall-exchanges.js'
import type { StoredExchange } from '../../proxy/recall-tool.js'
import type { ProxiedDialect, ProxyRead } from '../../proxy/dialect.js'
export type { ProxiedDialect, ProxyRead } from '../../proxy/dialect.js'
import type { RecallExchanges } from './recall-exchanges.js'
import { answerRecall, recallLimit } from '../recall.js'
import { InvalidHistoryError } from '../errors.js'
import type { ProxyCompactor, ProxyOutcome, ProxyRequest } from './compactor.js'
import { conversationKey } from './conversations.js'
import { type Scheduled, type ServedAt, keepInColdLayer, wallClock } from '../served.js'

/** A proxy's policy, from the settings. */
export interface ProxyPolicy {
  /** COMPACT_BUDGET: the prompt size from which a proxied request is compacted. */
  budgetTokens: number | 'off'
  /** COMPACT_LIMIT: a hard bound over the budget, which is then a target (a crossing waits while it would not pay back). */
  limitTokens?: number
  /** Set where the conversation's own model writes its summaries (COMPACT_PROXY_SUMMARIES), with the credentials it is forwarded with. */
  clientSummaries?: ClientSummaries
  /** COMPACT_CONTEXT_MANAGEMENT: the Messages API's context editing performed by the gateway, or forwarded untouched. */
  contextManagement?: 'gateway' | 'forward'
  /** COMPACT_RECALL: the recall tool the model is given (the gateway's own, where the dialect answers it), the MCP server's alone, or none. */
  recall?: 'auto' | 'mcp' | 'off'
  /** COMPACT_CONTROL_SHARE: the share of conversations sent through uncompacted, to measure what compaction saves (service/control.ts). */
  controlShare?: number
}

/** One proxied request as it came. */
export interface ProxiedAsk {
  body: ProxiedBody
  headers: IncomingHttpHeaders
  /** The API key's name ('' without auth). */
  keyName: string
  policy: ProxyPolicy
  /** The headers it is forwarded with (its credentials among them); throws where the gateway has none. */
  forwardHeaders: () => Record<string, string>
  /** The client's hang-up: its `signal` aborts what waits for the client (read only where something waits: it may be made when first read). */
  hangUp: { readonly signal: AbortSignal }
  log: Pick<BaseLogger, 'info' | 'warn' | 'error'>
  /** When the request began (performance.now()). */
  started: number
}

/** What the proxy's service needs, the app's own. */
export interface ProxyServing {
  compactor: ProxyCompactor
  clearing: ClearingTier | undefined
  /** The tool results cleared by context editing whose output this process has put in the cold layer (tenant, session, call). */
  clearedKept: { has(key: string): boolean; add(key: string): void }
  /** A compaction served: counted, logged, tallied, its record written or scheduled (service/served.ts). */
  serve: (run: CompactRun<ResponseView>, at: ServedAt) => Promise<Scheduled>
  activity: Activity
  metrics: Metrics
  store: ReadYourWrites
  /** The keys the gateway's compaction items and blocks are sealed under. */
  items: ItemSeals
  /** The cold layer's entries of cleared tool results, their outputs redacted (off the event loop where they are large). */
  clearedMemory: (uses: ClearedUse[]) => Promise<MemoryEntry[]>
  /** What the upstream saw in place of answers the client got, where the model called the recall tool (recall-exchanges.ts). */
  exchanges?: RecallExchanges
}

/** The Responses API's compaction answered here: the answer's body, its summary where one was written, and the record's writes (`recorded` waited for). */
export interface CompactedInput {
  body: Record<string, unknown>
  summaryId: string | undefined
  scheduled: Scheduled
}

/** Answered by the gateway itself, its compaction block alone: `compact_20260112` with `pause_after_compaction`, or compaction on demand. */
export interface Paused {
  kind: 'paused'
  outcome: { kind: 'compacted' | 'reused'; summaryId: string } | { kind: 'none'; summaryId?: undefined }
  /** Who wrote the summary (the record's summarizer kind), where the gateway wrote one. */
  summarizer?: string
  /** The record's writes, `recorded` already waited for. */
  scheduled: Scheduled
  contentType: string
  body: string
}

/** To be forwarded: the bytes and headers, what was done, and what to note once the upstream has answered. */
export interface Forward {
  kind: 'forward'
  outcome: ProxyOutcome
  /** The record's writes: `recorded` waited for before the answer, `begin` once the request is on its way. */
  scheduled: Scheduled
  payload: Buffer
  headers: Record<string, string>
  /** Why the history could not be read, where it could not (`x-compaction-not-read`). */
  notRead: string | undefined
  /** The history was changed though nothing was compacted (cleared tool results). */
  changed: boolean
  /** The upstream has begun to answer, or failed: summaries written ahead by the client's model may begin. */
  began(): void
  /** Once the upstream has answered (its status, when it was asked, how long it took to begin): what was done noted, and how the answer is relayed. */
  answered(status: number, asked: number, upstreamMs: number): Relayed
  /** The gateway's recall tool was added to the request's tools (its name: `x-compaction-recall-tool`). */
  recallTool?: string
  /** The model was offered the gateway's recall tool: how its calls are answered and the turn continued (server/proxy/recall-relay.ts). */
  recall?: OfferedRecall
}

/** The recall tool offered in a forwarded request: its calls' answers, the continuation's body, and where a turn's exchange is kept. */
export interface OfferedRecall {
  /** The API's format of the rounds. */
  format: RecallFormat
  search(call: RecallCall): Promise<string>
  /** The forwarded body with `added` after its messages. */
  continuation(added: readonly unknown[]): Buffer
  /** Kept where the client's answer will stand: after the messages it sent. */
  keep(exchange: Omit<StoredExchange, 'at'>): void
}

/** How an answer is relayed, and what the request's log line says of it. */
export interface Relayed {
  line: Record<string, unknown>
  /** Where the answer's usage goes, read as it passes (the Messages API's: the session's cost). */
  onUsage?: (usage: UpstreamUsage | undefined) => void
  /** What the gateway performed of the API's context management, written into the answer as the API gives it. */
  rewrite?: (stream: boolean) => Transform
}

/** What the provider's own context management left of a request (ProxyService.managed). */
interface Edited {
  /** The body after the API's own edits, read on from a compaction block where it holds one. */
  body: ProxiedBody
  managed: Managed | undefined
  responses: ManagedResponses | undefined
  /** The budget it is compacted at: the client's trigger or threshold where it asked for one, else the gateway's. */
  budgetTokens: number | 'off'
  headersUp: Record<string, string>
  /** The gateway's recall tool may come with a rewrite (a rewrite then leaves no thinking made before it). */
  toolMayCome: boolean
}

/** A request's conversation as read (ProxyService.conversationOf). */
interface ConversationRead<R> {
  /** The body, the client's own recall-tool items put back where they were. */
  body: ProxiedBody
  read: ProxyRead<R>
  session: string | undefined
  /** Of the control group (COMPACT_CONTROL_SHARE): forwarded as if the gateway were not there. */
  control: boolean
  gatewayBudget: number | 'off'
  naming: RecallNaming | undefined
  /** The conversation's key (conversationKey), '' where the body was not read. */
  conversation: string
  recallState: RecallState | undefined
  /** Where the client's answer to this request will stand among its messages. */
  answerAt: number
  restored: { restored: number } | undefined
}

/** The conversation's own model for this request's summaries (ProxyService.summaryModels). */
interface SummaryModels {
  /** The upstream has begun to answer (or failed): a summary written ahead may begin. */
  began(): void
  /** The bytes the request is forwarded as, once they are known. */
  forwarded: { bytes?: Buffer }
  ahead?: (messages: Message[]) => Summarizer
  explicit?: { model?: (messages: Message[]) => Summarizer }
}

/** Where a proxied compaction is served from: its request's session, budget, tenant and endpoint. */
type ServedFrom = Pick<ServedAt, 'session' | 'budgetTokens' | 'started' | 'keyName' | 'log' | 'endpoint'>

/** compact_20260112: the compaction given to the client as the API gives it, with what writing it took. */
interface CompactionGiven {
  block: ReturnType<typeof compactionBlock>
  usage: { input_tokens: number; output_tokens: number }
}

/** A request made ready to be forwarded: each step's result. */
interface Prepared<R> {
  edited: Edited
  conversation: ConversationRead<R>
  cleared: ReturnType<ClearingTier['apply']> | undefined
  outcome: ProxyOutcome
  at: ServedFrom
  models: SummaryModels
  seal: TenantSeal
  compaction: CompactionGiven | undefined
}

/** The tail compaction on demand keeps raw, at the most: the compaction request's least (everything else is summarized, as the API summarizes every message it is sent). */
const ON_DEMAND_KEEP_TOKENS = 100

/** The headers without one `anthropic-beta` value (absent where none is left). */
function withoutBeta(headers: Record<string, string>, beta: string): Record<string, string> {
  const value = headers['anthropic-beta']
  if (value === undefined) return headers
  const left = value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '' && v !== beta)
  const { 'anthropic-beta': _dropped, ...rest } = headers
  return left.length > 0 ? { ...rest, 'anthropic-beta': left.join(',') } : rest
}

/** The Responses compaction route's own schema, the one check of its body. */
const checkResponsesCompaction = bodyReader<ResponsesBody>(ResponsesCompactBody)

/** The proxy's requests served: one per app, over its compactor, clearing tier and records. */
export class ProxyService {
  /** What the prompt cache held of each conversation after its last metered answer (read + written), the oldest forgotten first. */
  private readonly cacheHeld = new Map<string, number>()

  constructor(private readonly serving: ProxyServing) {}

  /**
   * The prompt cache around a compaction, from an answer's usage: the request that crossed (and what the cache
   * held of the conversation before it that it no longer read), or one after it that carried its summary.
   */
  private cacheAround(
    ask: ProxiedAsk,
    session: string | undefined,
    conversation: string,
    around: { phase: 'crossing' | 'after'; summaryId: string } | undefined,
    usage: UpstreamUsage
  ): void {
    // by the conversation where the body was read, else by the session its headers name (a body far under the budget is forwarded unread)
    const keys = [conversation, session === undefined ? '' : `${ask.keyName}\u0000${session}`].filter((k) => k !== '')
    const held = keys.map((k) => this.cacheHeld.get(k)).find((h) => h !== undefined)
    if (around?.phase === 'crossing') {
      const invalidated = held === undefined ? 0 : Math.max(0, held - usage.cache_read_input_tokens)
      this.serving.activity.compactionCache(ask.keyName, session, around.summaryId, { phase: 'crossing', usage, invalidated })
    } else if (around) this.serving.activity.compactionCache(ask.keyName, session, around.summaryId, { phase: 'after', usage })
    for (const key of keys) {
      this.cacheHeld.delete(key)
      this.cacheHeld.set(key, usage.cache_read_input_tokens + usage.cache_creation_input_tokens)
    }
    while (this.cacheHeld.size > CACHE_HELD_KEPT) {
      const oldest = this.cacheHeld.keys().next()
      if (oldest.done) break
      this.cacheHeld.delete(oldest.value)
    }
  }

  /**
   * The tenant's sealing of the gateway's compaction items, its keys read first where the request may hold an
   * item or a block, or ask for one (a request that can do neither never waits for the store).
   */
  private async sealFor<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, holdsCompaction: boolean): Promise<TenantSeal> {
    const { bytes } = ask.body
    // (only a dialect whose API has them, and where the gateway performs them, searches its bytes for them)
    const performs = ask.policy.contextManagement !== 'forward'
    const mayHold =
      holdsCompaction ||
      (performs && dialect.responsesCompaction === true && bytes.includes(OWN_ITEM_KEY)) ||
      (performs && (dialect.contextManagement === true || dialect.responsesCompaction === true) && bytes.includes(CONTEXT_MANAGEMENT_KEY))
    if (mayHold) await this.serving.items.ready()
    return this.serving.items.for(ask.keyName)
  }

  /**
   * One proxied request made ready, in named steps: read the provider's own context management (managed),
   * read the conversation (conversationOf), clear old tool results (cleared), compact (compacted), then
   * pause with the compaction alone (paused) or forward (forwardOf); what is noted once the upstream has
   * answered is `answered`. Compacted past its budget, forwarded byte for byte under it; every refusal of
   * what it holds is a 400 at its place in the client's body.
   */
  async prepare<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk): Promise<Paused | Forward> {
    const performs = ask.policy.contextManagement !== 'forward'
    // compaction on demand (`compaction: {type: "summarize"}`): answered here for an upstream without it
    // (one search of the bytes: a body without the key holds neither the field nor a block, nor does what is made of it)
    const holdsCompaction = dialect.contextManagement === true && performs && ask.body.bytes.includes(COMPACTION_KEY)
    const seal = await this.sealFor(dialect, ask, holdsCompaction)
    const onDemand = holdsCompaction ? topLevelField(ask.body.bytes, 'compaction') : undefined
    if (onDemand && dialect.endpoint !== 'count_tokens') return this.compactOnDemand(dialect, ask, seal)
    const edited = this.managed(dialect, ask, seal, holdsCompaction, onDemand?.without)
    const asRead = await this.conversationOf(dialect, ask, edited)
    const cleared = this.cleared(dialect, ask, edited, asRead)
    // what is compacted and forwarded: the history with its cleared results where clearing changed it
    const conversation =
      cleared?.changed && 'parts' in asRead.read
        ? { ...asRead, read: { parts: { ...asRead.read.parts, messages: cleared.messages }, read: asRead.read.read } }
        : asRead
    const models = this.summaryModels(dialect, ask, edited, conversation)
    const outcome = await this.compacted(dialect, ask, edited, conversation, models)
    const at = {
      session: conversation.session,
      budgetTokens: edited.budgetTokens,
      started: ask.started,
      keyName: ask.keyName,
      log: ask.log,
      endpoint: dialect.endpoint
    }
    // compact_20260112: the compaction (new, or an earlier one standing in) given to the client as the API gives it
    const compaction =
      edited.managed?.compact && outcome.kind !== 'none'
        ? {
            block: compactionBlock(outcome.messages, seal),
            usage:
              outcome.kind === 'compacted'
                ? { input_tokens: outcome.run.response.summarizer.input_tokens, output_tokens: outcome.run.response.summarizer.output_tokens }
                : { input_tokens: 0, output_tokens: 0 }
          }
        : undefined
    if (edited.managed && compaction && edited.managed.compact?.pauseAfterCompaction && outcome.kind !== 'none') {
      models.began()
      return this.paused(edited.managed, conversation.body, outcome, at, compaction)
    }
    return this.forwardOf(dialect, ask, { edited, conversation, cleared, outcome, at, models, seal, compaction })
  }

  /**
   * Step one: the provider's own context management performed where the gateway performs it (the Messages
   * API's edits and `compact_20260112`, the Responses API's compaction items), a compaction block read back,
   * the budget the request is compacted at, the headers it goes up with.
   */
  private managed<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, seal: TenantSeal, holdsCompaction: boolean, withoutOnDemand: Buffer | undefined): Edited {
    const { policy, headers } = ask
    const performs = policy.contextManagement !== 'forward'
    // (a token count takes the field and ignores it: it counts the conversation as sent)
    const asked = withoutOnDemand ? ask.body.without(withoutOnDemand) : ask.body
    // (the edits run before the body is read: their placeholders name the MCP tool with the session the headers name)
    const headerNaming = recallNaming(policy.recall, dialect, proxySession(headers, undefined), undefined)
    // where the gateway's recall tool would come with a rewrite, the rewrite leaves no thinking made before it
    const toolMayCome = policy.recall === 'auto' && dialect.recallTool !== undefined
    const managed = dialect.contextManagement && performs ? manageContext(asked, seal, (id) => clearedNote(headerNaming, id), toolMayCome) : undefined
    const responses = dialect.responsesCompaction && performs ? manageResponses(asked, seal) : undefined
    const edited = managed?.body ?? responses?.body ?? asked
    // a history that holds a compaction block is read from it on (the gateway's own stands for what it encoded)
    const body = holdsCompaction && !managed?.compact ? (readBackCompaction(edited, seal) ?? edited) : edited
    // the gateway's own headers are checked on every request, read or not: one it cannot use is refused, named
    const headerBudget = budgetTokensOf(headers['x-compaction-budget'], policy.budgetTokens)
    // compact_20260112: the gateway's compaction is the one asked for, at its trigger
    const budgetTokens = managed?.compact ? managed.compact.trigger : (responses?.threshold ?? headerBudget)
    ownSession(headers)
    const forwardHeaders = ask.forwardHeaders()
    const headersUp = managed ? withoutConsumedBetas(forwardHeaders) : forwardHeaders
    return { body, managed, responses, budgetTokens, headersUp, toolMayCome }
  }

  /**
   * Step two: the conversation read where it may be compacted: its session (the client's, else a stable id of
   * the gateway's), whether it is of the control group, the recall it is offered, and the recall exchanges the
   * upstream saw in place of answers the client got, put back.
   */
  private async conversationOf<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, edited: Edited): Promise<ConversationRead<R>> {
    const { policy, headers, keyName } = ask
    const { managed, responses, budgetTokens } = edited
    let body = edited.body
    const named = proxySession(headers, undefined) !== undefined
    const clientModel = policy.clientSummaries !== undefined && dialect.clientSummarizer !== undefined
    let read = this.read(dialect, body, budgetTokens, clientModel, named)
    // every conversation on record: one whose client names no session gets a stable id of the gateway's
    // (a body forwarded unread has the session its headers name, if any: its cost is counted there)
    const session = 'parts' in read ? (proxySession(headers, read.parts.userId) ?? derivedSession(read.parts)) : proxySession(headers, undefined)
    // a conversation of the control group (COMPACT_CONTROL_SHARE) goes through as if the gateway were not there:
    // nothing compacted or cleared, no recall tool; what its client asks for itself (context edits, a compaction) is done
    const control = policy.controlShare !== undefined && session !== undefined && inControlGroup(keyName, session, policy.controlShare)
    const gatewayBudget = control && !managed?.compact && responses?.threshold === undefined ? ('off' as const) : budgetTokens
    const naming = control
      ? undefined
      : recallNaming(policy.recall, dialect, session, 'read' in read ? [...(read.parts.tools ?? []), ...(dialect.declaredTools?.(read.read) ?? [])] : undefined)
    // answers the model got with the recall tool's help, put back as the upstream saw them
    // (a session holds several conversations: an agent's main loop and each of its subagents)
    const conversation = 'parts' in read ? conversationKey({ keyName, session, messages: read.parts.messages, system: read.parts.system }) : ''
    const recallState = naming && 'tool' in naming && this.serving.exchanges && 'parts' in read ? await this.serving.exchanges.load(conversation) : undefined
    // (the client's answer to this request will stand after the messages it sent)
    const answerAt = 'read' in read ? (dialect.answerAt?.(read.read) ?? read.parts.messages.length) : 0
    let restored: { restored: number } | undefined
    if (recallState && recallState.exchanges.length > 0 && 'read' in read) {
      if (dialect.restoreItems) {
        // the client's own items put back, then read again: the way back to its items goes through the read
        const again = dialect.restoreItems(body, read.read, recallState.exchanges)
        if (again) {
          body = again
          read = this.read(dialect, body, budgetTokens, clientModel, named)
          restored = { restored: 1 }
        }
      } else {
        const done = restoreExchanges(read.parts.messages, recallState.exchanges as RecallExchange[])
        restored = done
        if (done.restored > 0) read = { parts: { ...read.parts, messages: done.messages }, read: read.read }
      }
    }
    return { body, read, session, control, gatewayBudget, naming, conversation, recallState, answerAt, restored }
  }

  /** Step three, clearing first (COMPACT_STRATEGY): the history's old tool results cleared where that is enough. */
  private cleared<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, edited: Edited, c: ConversationRead<R>): ReturnType<ClearingTier['apply']> | undefined {
    const { clearing } = this.serving
    const readBody = 'parts' in c.read ? c.read : undefined
    if (!clearing || c.control || edited.managed?.compact || edited.responses || !readBody) return undefined
    const fixed = dialect.fixed
    return clearing.apply(
      `${ask.keyName}\u0000${c.session}`,
      readBody.parts,
      edited.budgetTokens,
      fixed ? (m, b) => fixed(readBody.read, m, b) : undefined,
      (id) => clearedNote(c.naming, id),
      edited.toolMayCome
    )
  }

  /**
   * The conversation's own model (COMPACT_PROXY_SUMMARIES): a summarizer that writes ahead once the upstream
   * has begun to answer this request (its prefix is then in the cache the summary call reads), and the one a
   * compaction the client asked for and waits for is written by.
   */
  private summaryModels<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, edited: Edited, c: ConversationRead<R>): SummaryModels {
    let began = (): void => undefined
    const after = new Promise<void>((resolve) => (began = resolve))
    const forwarded: { bytes?: Buffer } = {}
    const settings = ask.policy.clientSummaries
    const make = settings && dialect.clientSummarizer && 'read' in c.read ? dialect.clientSummarizer : undefined
    const read = 'read' in c.read ? c.read.read : undefined
    const ahead = make && settings ? make(settings, c.body, read as R, edited.headersUp, after, () => forwarded.bytes) : undefined
    // compact_20260112: the client asked for the compaction and waits for it, written by a model (the conversation's own: COMPACT_PROXY_SUMMARIES)
    const explicit = edited.managed?.compact
      ? { ...(make && settings ? { model: make(settings, c.body, read as R, edited.headersUp, Promise.resolve(), () => undefined) } : {}) }
      : undefined
    return { began: () => began(), forwarded, ...(ahead ? { ahead } : {}), ...(explicit ? { explicit } : {}) }
  }

  /** Step four: the history compacted by the proxy's compactor (a crossing, or the summary standing in), the upstream let go where it fails. */
  private compacted<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, edited: Edited, c: ConversationRead<R>, models: SummaryModels): Promise<ProxyOutcome> {
    const { policy } = ask
    const instructions = edited.managed?.compact?.instructions
    return this.compact(dialect, c.read, ask, {
      keyName: ask.keyName,
      session: c.session,
      budgetTokens: c.gatewayBudget,
      // the limit over the gateway's own budget only: a compaction the client asks for at its trigger is made there
      ...(policy.limitTokens !== undefined && !edited.managed?.compact && edited.responses?.threshold === undefined ? { limitTokens: policy.limitTokens } : {}),
      ...(c.naming ? { recall: c.naming } : {}),
      ...(models.ahead ? { clientSummarizer: models.ahead } : {}),
      ...(instructions ? { instructions } : {}),
      ...(models.explicit ? { explicit: models.explicit } : {})
    }).catch((err: unknown) => {
      models.began()
      throw err
    })
  }

  /** compact_20260112 with `pause_after_compaction`: the compaction block alone, recorded before it is answered. */
  private async paused(managed: Managed, body: ProxiedBody, outcome: ProxyOutcome, at: ServedFrom, compaction: CompactionGiven): Promise<Paused> {
    const scheduled = await this.serve(outcome, at)
    await scheduled.recorded
    const value = body.value() as Record<string, unknown>
    const paused = pausedAnswer(value.model, value.stream === true, compaction.block, compaction.usage, managed.edited.applied)
    return { kind: 'paused', outcome: outcome.kind === 'none' ? { kind: 'none' } : { kind: outcome.kind, summaryId: outcome.summaryId }, scheduled, ...paused }
  }

  /** Step five: the bytes forwarded (the compaction, the cleared history, the recall tool written in where any is), the compaction served. */
  private async forwardOf<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, p: Prepared<R>): Promise<Forward> {
    const { edited, conversation: c, cleared, outcome, models } = p
    const { read, body, recallState, restored, naming, session } = c
    const restoredAny = restored !== undefined && restored.restored > 0 && !dialect.restoreItems
    const clearedHistory = cleared?.changed
      ? { messages: cleared.messages, uses: cleared.uses }
      : restoredAny && 'parts' in read
        ? { messages: read.parts.messages, uses: [] }
        : undefined
    // the recall tool, from the conversation's first rewrite on (its request changes the prompt anyway)
    const rewritten = outcome.kind !== 'none' || clearedHistory !== undefined || (edited.managed?.edited.cleared.length ?? 0) > 0
    const offer =
      naming !== undefined && 'tool' in naming && dialect.recallTool !== undefined && session !== undefined && (rewritten || recallState?.offered === true)
    if (offer && recallState?.offered !== true)
      await this.serving.exchanges?.offer(c.conversation, { key_name: ask.keyName, session_id: session, since_ms: wallClock(ask.started) })
    const payload = !('read' in read)
      ? body.bytes
      : outcome.kind !== 'none' || clearedHistory || offer
        ? dialect.write(body, read.read, outcome.kind === 'none' ? undefined : outcome, clearedHistory, offer)
        : body.bytes
    models.forwarded.bytes = payload
    const scheduled = await this.serve(outcome, p.at)
    return {
      kind: 'forward',
      outcome,
      scheduled,
      payload,
      headers: edited.headersUp,
      notRead: 'unread' in read ? read.unread : undefined,
      changed: cleared?.changed === true,
      began: models.began,
      ...(offer ? { recallTool: PROXY_RECALL_TOOL } : {}),
      ...(offer && session !== undefined && dialect.recallTool !== undefined && GENERATION.has(dialect.endpoint)
        ? { recall: this.offered(ask.keyName, session, c.conversation, payload, c.answerAt, dialect.recallTool, wallClock(ask.started)) }
        : {}),
      answered: (status, asked, upstreamMs) => this.answered(dialect, ask, p, payload, { status, asked, upstreamMs })
    }
  }

  /** Step six, once the upstream has answered: what was done noted (cleared outputs, tallies, the session's cost, the log line) and how the answer is relayed. */
  private answered<R>(
    dialect: ProxiedDialect<R>,
    ask: ProxiedAsk,
    p: Prepared<R>,
    payload: Buffer,
    answer: { status: number; asked: number; upstreamMs: number }
  ): Relayed {
    const { serving } = this
    const { edited, conversation: c, cleared, outcome } = p
    const { keyName, started } = ask
    const { status, asked, upstreamMs } = answer
    const { session } = c
    serving.metrics.proxyUpstreamSeconds.observe({ endpoint: dialect.endpoint }, upstreamMs / 1_000)
    if (outcome.kind === 'compacted') serving.metrics.crossingWait.observe((asked - started) / 1_000)
    if (edited.managed) this.keepClearedEvidence(ask, session, edited.managed.edited.cleared)
    if (cleared && cleared.newly.length > 0) {
      this.keepClearedEvidence(ask, session, cleared.newly)
      serving.activity.clearing(keyName, session, {
        tokens: cleared.newly.reduce((n, u) => n + u.tokens, 0),
        uses: cleared.newly.length,
        waitMs: asked - started
      })
    }
    // On the request's one line, written when the answer ends (a line of its own cost a write a request).
    const line = {
      event: 'proxied',
      endpoint: dialect.endpoint,
      status,
      compaction: outcome.kind,
      ...(c.control ? { control: true } : {}),
      ...('unread' in c.read && c.read.unread ? { not_read: c.read.unread } : {}),
      summary_id: outcome.kind === 'none' ? undefined : outcome.summaryId,
      // a crossing's size as it crossed the budget, and what was forwarded in its place
      estimated_tokens: outcome.kind === 'compacted' ? outcome.crossed : outcome.tokens,
      ...(outcome.kind === 'compacted' ? { forwarded_tokens: outcome.tokens, source: outcome.source } : {}),
      session_id: session,
      prepare_ms: Math.round(asked - started),
      upstream_ms: Math.round(upstreamMs)
    }
    // A session's cost: what the upstream says each answer cost, and what compaction kept out of the request.
    const keptOut = outcome.kind === 'none' ? 0 : (c.body.bytes.length - payload.length) / CHARS_PER_TOKEN
    // (an answer whose usage could not be read, an error's or one too large, is counted unmetered)
    // with a control group, each metered request of a known conversation is tallied in its group and by its history's length
    const group = ask.policy.controlShare !== undefined ? { control: c.control, historyTokens: ask.body.bytes.length / CHARS_PER_TOKEN } : undefined
    // (a recall round's continuation after a crossing is a request after it: only the first answer crossed)
    let around =
      outcome.kind === 'none' ? undefined : { phase: outcome.kind === 'compacted' ? ('crossing' as const) : ('after' as const), summaryId: outcome.summaryId }
    const onUsage = dialect.usage
      ? (usage: UpstreamUsage | undefined) => {
          serving.activity.request(keyName, session, { keptOut, metered: usage !== undefined, usage, group })
          if (!usage) return
          this.cacheAround(ask, session, c.conversation, around, usage)
          if (around) around = { ...around, phase: 'after' }
        }
      : undefined
    if (!dialect.usage && status === 200) serving.activity.request(keyName, session, { keptOut, metered: false })
    return { line, ...(onUsage ? { onUsage } : {}), ...answerRewrite(edited.managed, p.compaction, edited.responses, outcome, payload, p.seal) }
  }

  /**
   * Compaction on demand (beta compact-2026-09-04) answered here, for an upstream without it: the whole of
   * `messages` (read from an earlier compaction block on) summarized by a model while the client waits (the
   * gateway's, else the client's own with its own credentials, as crossings are; extractive only where neither
   * can be reached, and said so in `x-compaction-summarizer`), under the request's `instructions`, recorded
   * under its session, and answered as the API answers: one `compaction` block, `stop_reason: "compaction"`.
   */
  private async compactOnDemand<R>(dialect: ProxiedDialect<R>, ask: ProxiedAsk, seal: TenantSeal): Promise<Paused> {
    const value = ask.body.value() as Record<string, unknown>
    const beta = ask.headers['anthropic-beta']
    const { instructions } = readOnDemand(value, Array.isArray(beta) ? beta.join(',') : beta)
    const parts = readMessagesRequest(value)
    const messages = fromCompaction(parts.messages, seal).messages
    const session = proxySession(ask.headers, parts.userId) ?? derivedSession(parts)
    const request: CompactionInput = {
      messages,
      mode: 'manual',
      keepTokens: ON_DEMAND_KEEP_TOKENS,
      ...(parts.system !== undefined ? { system: parts.system } : {}),
      ...(parts.tools !== undefined ? { tools: parts.tools } : {}),
      ...(instructions !== undefined ? { instructions } : {}),
      ...(session !== undefined ? { sessionId: session } : {})
    }
    // The conversation's own model (COMPACT_PROXY_SUMMARIES): its request as sent but for the field, in its conversation.
    const field = topLevelField(ask.body.bytes, 'compaction')
    const settings = ask.policy.clientSummaries
    const clientModel =
      settings && dialect.clientSummarizer && field
        ? dialect.clientSummarizer(
            settings,
            ask.body.without(field.without),
            undefined as R,
            withoutBeta(ask.forwardHeaders(), ON_DEMAND_BETA),
            Promise.resolve(),
            () => undefined
          )?.(parts.messages)
        : undefined
    const { scheduled, done, usage } = await this.explicit(request, ask, { session, endpoint: dialect.endpoint, recallTool: false }, clientModel, (err) =>
      err instanceof InvalidHistoryError ? new InvalidRequestError(err.message, err.path) : err
    )
    const answer = pausedAnswer(value.model, value.stream === true, onDemandBlock(done?.messages, seal), usage, undefined)
    return {
      kind: 'paused',
      outcome: done ? { kind: 'compacted', summaryId: done.summary.id } : { kind: 'none' },
      ...(done ? { summarizer: done.summarizer.kind } : {}),
      scheduled,
      ...answer
    }
  }

  /**
   * `POST /v1/responses/compact` answered here, for an upstream without the Responses API's compaction: the
   * input (read from the gateway's newest own item on) compacted as `/v1/compact` compacts a Responses history
   * (`mode: manual`), recorded under its session, and answered as the API answers, the input's user messages
   * then one `compaction` item that stands for the compacted input.
   */
  async compactResponses(
    body: ProxiedBody,
    ask: Pick<ProxiedAsk, 'headers' | 'keyName' | 'hangUp' | 'log' | 'started'>,
    clientModel?: (messages: Message[]) => Summarizer
  ): Promise<CompactedInput> {
    const checked = checkResponsesCompaction(body.value('input'))
    if (!checked.ok) throw new InvalidRequestError(checked.message, checked.path ?? '/')
    const fields = checked.value
    if (fields.input === undefined) throw new InvalidRequestError('body needs the field `input`', '/')
    const items = typeof fields.input === 'string' ? [{ type: 'message', role: 'user', content: fields.input }] : fields.input
    await this.serving.items.ready()
    const seal = this.serving.items.for(ask.keyName)
    const input = readBackItems(items, seal).input
    const session = proxySession(
      ask.headers,
      typeof fields.prompt_cache_key === 'string' && fields.prompt_cache_key !== '' ? fields.prompt_cache_key : undefined
    )
    const read = checkCompactValue({ messages: input, format: 'openai-responses', mode: 'manual', ...(session !== undefined ? { session_id: session } : {}) })
    if (!read.ok) throw inInput(read.message, read.path)
    // written by a model while the client waits: the gateway's, else the client's own (its request as sent, its key)
    const model = clientModel?.(read.body.messages as Message[])
    const { scheduled, done, usage } = await this.explicit(compactionInput(read.body), ask, { session, endpoint: 'responses_compact' }, model, (err) =>
      err instanceof InvalidHistoryError ? inInput(err.message, err.path) : err
    )
    const item = compactionItem(done ? done.messages : input, seal)
    return { body: compactedResponse(input, item, usage, Math.floor(Date.now() / 1_000)), summaryId: done?.summary.id, scheduled }
  }

  /**
   * A compaction the client asked for and waits for (compaction on demand, the Responses API's): run by a model
   * (service/proxy/compactor.ts: explicit), served and recorded under its session, the record waited for.
   * `refusal`: what a problem in the history is said as, in the client's request.
   */
  private async explicit(
    request: CompactionInput,
    ask: Pick<ProxiedAsk, 'keyName' | 'hangUp' | 'log' | 'started'>,
    at: { session: string | undefined; endpoint: string; recallTool?: RecallNaming | false },
    model: Summarizer | undefined,
    refusal: (err: unknown) => unknown
  ): Promise<{ scheduled: Scheduled; done: Summarized<CompactResponseBody> | undefined; usage: { input_tokens: number; output_tokens: number } }> {
    const context: RunContext = { keyName: ask.keyName, signal: ask.hangUp.signal, ...(at.recallTool !== undefined ? { recallTool: at.recallTool } : {}) }
    const run = await this.serving.compactor.explicit(request, context, model).catch((err: unknown) => {
      throw refusal(err)
    })
    const { response } = run
    const scheduled = await this.serving.serve(run, {
      via: 'proxy',
      keyName: ask.keyName,
      session: at.session,
      mode: 'manual',
      budgetTokens: 'off',
      log: ask.log,
      started: ask.started,
      endpoint: at.endpoint,
      waitMs: performance.now() - ask.started
    })
    await scheduled.recorded
    const done = summarized(response) ? response : undefined
    const usage = done ? { input_tokens: done.summarizer.input_tokens, output_tokens: done.summarizer.output_tokens } : { input_tokens: 0, output_tokens: 0 }
    return { scheduled, done, usage }
  }

  /** The body as the compactor reads it; one whose bytes alone are far under the budget is forwarded unread (nothing could be done to it). */
  private read<R>(dialect: ProxiedDialect<R>, body: ProxiedBody, budgetTokens: number | 'off', clientModel: boolean, named: boolean): ProxyRead<R> {
    if (budgetTokens !== 'off' && body.farUnder(budgetTokens * this.serving.compactor.quietShare(clientModel, named))) return { unread: undefined }
    return dialect.read(body, () => budgetTokens === 'off' || !body.farUnder(budgetTokens))
  }

  /** What the compactor does to the history: every refusal of its content a 400, at its place in the client's body. */
  private async compact<R>(
    dialect: ProxiedDialect<R>,
    read: ProxyRead<R>,
    ask: Pick<ProxiedAsk, 'hangUp'>,
    at: Omit<ProxyRequest, 'messages' | 'system' | 'tools' | 'signal'>
  ): Promise<ProxyOutcome> {
    if (!('parts' in read)) return { kind: 'none', tokens: undefined }
    const { messages, system, tools, unbindThinking } = read.parts
    try {
      return await this.serving.compactor.prepare({ messages, system, tools, ...at, ...(unbindThinking ? { unbindThinking } : {}), signal: ask.hangUp.signal })
    } catch (err) {
      if (err instanceof InvalidHistoryError) throw new InvalidRequestError(err.message, dialect.place ? dialect.place(read.read, err.path ?? '') : err.path)
      throw err
    }
  }

  /**
   * A proxied compaction served (service/served.ts): counted, logged, tallied and recorded. The record and the
   * cold layer never hold the forward: they are written while the model works on the forwarded request, and
   * the answer waits for the record. With SQLite, whose indexing holds this thread, the cold layer begins once
   * the request is on its way (`begin`), reads of the session waiting for it; with a store other replicas read,
   * the answer waits too.
   */
  private async serve(outcome: ProxyOutcome, at: Pick<ServedAt, 'session' | 'budgetTokens' | 'started' | 'keyName' | 'log' | 'endpoint'>): Promise<Scheduled> {
    if (outcome.kind !== 'compacted') return {}
    return this.serving.serve(outcome.run, {
      ...at,
      via: 'proxy',
      mode: 'auto',
      source: outcome.source,
      waitMs: performance.now() - at.started,
      ...(outcome.timing ? { crossing: outcome.timing } : {})
    })
  }

  /** The recall tool offered in `payload`: its calls searched in the session's cold layer, its exchanges kept with the conversation. */
  private offered(
    keyName: string,
    session: string,
    conversation: string,
    payload: Buffer,
    answerAt: number,
    format: RecallFormat,
    since: number
  ): OfferedRecall {
    const { store, exchanges, metrics } = this.serving
    return {
      format,
      search: async (call) => {
        const text = await answerRecall(store, keyName, session, call.query, recallLimit(call.limit))
        metrics.recallRequests.inc({ outcome: text.startsWith('[1]') ? 'hits' : 'empty' })
        return text
      },
      continuation: (added) => {
        const value = JSON.parse(payload.toString('utf8')) as { messages: Message[]; input: unknown[]; contents: unknown[] }
        switch (format) {
          case 'responses':
            return Buffer.from(JSON.stringify({ ...value, input: [...value.input, ...continuationItems(added)] }))
          case 'gemini':
            return Buffer.from(JSON.stringify({ ...value, contents: [...value.contents, ...added] }))
          default: {
            const after = format === 'messages' ? withBreakpoint(value, added as Message[]) : added
            return Buffer.from(JSON.stringify({ ...value, messages: [...value.messages, ...after] }))
          }
        }
      },
      keep: (exchange) => void exchanges?.add(conversation, { at: answerAt, ...exchange }, { key_name: keyName, session_id: session, since_ms: since })
    }
  }

  /** Keeps the whole output of each cleared result in the session's cold layer, once a process (a result is cleared again at every request after). */
  private keepClearedEvidence(ask: ProxiedAsk, session: string | undefined, cleared: readonly ClearedUse[]): void {
    if (session === undefined || cleared.length === 0) return
    const kept = this.serving.clearedKept
    const fresh = cleared.filter((c) => !kept.has(`${ask.keyName}\u0000${session}\u0000${c.tool_use_id}`))
    if (fresh.length === 0) return
    for (const c of fresh) kept.add(`${ask.keyName}\u0000${session}\u0000${c.tool_use_id}`)
    const failure = "a cleared tool result's output could not be kept in the cold layer"
    void this.serving.clearedMemory([...fresh]).then(
      (rows) => keepInColdLayer(this.serving, { keyName: ask.keyName, session, log: ask.log, started: ask.started }, rows, failure),
      (err: unknown) => ask.log.error({ err }, failure)
    )
  }
}

/** Conversations whose cache is remembered (a forgotten one's next crossing counts nothing invalidated). */
const CACHE_HELD_KEPT = 100_000

/** The endpoints whose answers are a model's turn (a recall call in them is answered; a token count has none). */
const GENERATION = new Set(['messages', 'chat_completions', 'responses', 'gemini_generate', 'gemini_stream'])

/** Cache breakpoints a Messages API request may carry. */
const MAX_BREAKPOINTS = 4

/**
 * A continuation's added messages with a cache breakpoint on their last block, where the request has room for
 * one: the rounds are then in the cache when the client's next request reads through them. (Only the request
 * sent: the exchange kept for the next request is as the upstream saw its content, without the mark.)
 */
function withBreakpoint(value: object, added: readonly Message[]): readonly Message[] {
  const last = added.at(-1)
  if (!last || !Array.isArray(last.content) || last.content.length === 0) return added
  if ((JSON.stringify(value).match(/"cache_control":/g) ?? []).length >= MAX_BREAKPOINTS) return added
  const content = last.content.map((b, k) => (k === last.content.length - 1 ? { ...b, cache_control: { type: 'ephemeral' } } : b))
  return [...added.slice(0, -1), { ...last, content }]
}

/**
 * The recall tool a conversation's model has, as the texts it reads name it: the MCP server's (its session
 * given) where COMPACT_RECALL is `mcp`; the gateway's own where it is `auto` and the dialect answers the
 * tool's calls (unless the client has a tool of that name); none without a session, or with `off`.
 */
export function recallNaming<R>(
  mode: ProxyPolicy['recall'],
  dialect: Pick<ProxiedDialect<R>, 'recallTool'>,
  session: string | undefined,
  tools: readonly unknown[] | undefined
): RecallNaming | undefined {
  if (session === undefined || mode === 'off') return undefined
  if (mode === 'mcp') return { mcp: { session } }
  const taken = tools !== undefined && declares(tools, PROXY_RECALL_TOOL)
  return dialect.recallTool && !taken ? { tool: PROXY_RECALL_TOOL } : undefined
}

/** Whether tool declarations name `name`, in any API's shape: `name`, `function.name`, Gemini's `functionDeclarations`, a namespace's `tools`. */
function declares(tools: readonly unknown[], name: string): boolean {
  return tools.some((t) => {
    if (typeof t !== 'object' || t === null) return false
    const tool = t as { name?: unknown; function?: { name?: unknown }; functionDeclarations?: unknown; tools?: unknown }
    if (tool.name === name || tool.function?.name === name) return true
    return [tool.functionDeclarations, tool.tools].some((inner) => Array.isArray(inner) && declares(inner, name))
  })
}

/** A problem the core found in the compacted `messages`, said of the Responses request's `input` it was read from. */
function inInput(message: string, path: string | undefined): InvalidRequestError {
  return new InvalidRequestError(message.replace(/\bmessages\b/, 'input'), path?.replace(/^\/messages/, '/input'))
}

/**
 * What the gateway performed of the API's context management, in the answer as the API gives it: the
 * Messages API's applied edits (and a compaction asked for), or the Responses API's compaction item first
 * in the output, standing for the input as forwarded.
 */
function answerRewrite(
  managed: Managed | undefined,
  compaction: Parameters<typeof withAppliedEdits>[2],
  responses: ManagedResponses | undefined,
  outcome: ProxyOutcome,
  payload: Buffer,
  seal: TenantSeal
): Pick<Relayed, 'rewrite'> {
  if (managed && !(managed.quiet && !compaction))
    return { rewrite: (stream) => withAppliedEdits(stream, { applied_edits: managed.edited.applied }, compaction) }
  if (responses?.threshold !== undefined && outcome.kind !== 'none') {
    const item = compactionItem((JSON.parse(payload.toString('utf8')) as { input: unknown[] }).input, seal)
    return { rewrite: (stream) => withCompactionItem(stream, item) }
  }
  return {}
}
