import {
  type Block,
  type Clip,
  type ClearedUse,
  type CompactionStats,
  type Compacted,
  RECALL_TOOL_NAME,
  type RecallNaming,
  clearedNote,
  clearToolUses,
  promptTokens,
  type NotCompacted,
  type CompactionPlan,
  type Message,
  type Redactors,
  finishCompaction,
  planCompaction,
  promptTexts,
  uncompacted,
  validateHistory
} from '../compaction/index.js'
import { DOCTRINE_VERSION } from '../prompts/doctrine.js'
import { type MemoryEntry, clearedEntries, clippedMemory, readMemory, redactMemory } from '../memory/entries.js'
import { compactionRedactors } from '../secrets/index.js'
import { DEFAULT_BUDGET_TOKENS } from '../contract/defaults.js'
import { ConversationsText } from './conversations.js'
import type { CompactRequestBody } from '../contract/schemas.js'
import type { SummarizerReport, Summarizer } from '../summarizer/summarizer.js'
import { InvalidHistoryError, SummarizerUnavailableError } from './errors.js'
import { InvalidRequestError } from '../contract/errors.js'
import { type Format, adaptHistory, givenBack, rulesOf } from '../formats/index.js'

export interface CompactDefaults {
  budgetTokens: number | 'off'
  keepTokens?: number
  keepTurns: number
  /** The operator chose the extractive summarizer (COMPACT_SUMMARIZER=extractive): its summaries are no fallback. */
  extractiveChosen?: boolean
}

export interface CompactDeps {
  defaults: CompactDefaults
  /** The model summarizer behind its fallback, when the server has one (its model id is in its reports). */
  modelSummarizer?: Summarizer
  extractive: Summarizer
  newId: () => string
  now: () => number
  /** Compactions with a session id keep a cold layer (a store is there to keep it). */
  coldLayer?: boolean
  /** What the key's other conversations sent: their harness text is left out of this one's requests. */
  conversations?: ConversationsText
}

/** Time spent in each phase, for the Server-Timing header. */
export interface PhaseTimings {
  validate: number
  /** Estimate, cut, ledger, prior summaries. */
  plan: number
  /** The summary written, merged, guarded, fitted, and the history assembled. */
  summarize: number
}

/** A history whose old tool results were cleared and nothing summarized (strategy clear or hybrid). */
export interface ClearedOutcome {
  compacted: true
  reason: 'cleared'
  messages: Message[]
  kept_from: number
  clips: Clip[]
  cleared: { message: number; tool_use_id: string; tool: string; tokens: number }[]
  stats: CompactionStats
  summary?: undefined
  summarizer?: undefined
  doctrine_version: string
}

/** The response body of POST /v1/compact (its schema: CompactResponse in server/schemas.ts). */
export type CompactResponseBody =
  | (Compacted & { summarizer: SummarizerReport; doctrine_version: string })
  | (NotCompacted & { summarizer?: undefined; doctrine_version: string })
  | ClearedOutcome

/**
 * A compaction's answer has three views: the answer (CompactResponseBody), the answer without its messages
 * (ResponseView: what a worker hands back beside the serialized answer, and what is counted, recorded and
 * logged), and either narrowed to one that summarized (Summarized<…>: its summary and summarizer there, no
 * assertion needed).
 */
export type ResponseView = CompactResponseBody extends infer T ? (T extends unknown ? Omit<T, 'messages'> : never) : never

/** An answer, or an answer's view, that summarized (a summary replaced turns), as opposed to one that cleared or did nothing. */
export type Summarized<T extends ResponseView | CompactResponseBody> = Extract<T, { summarizer: SummarizerReport }>

/** Whether an answer summarized. */
export function summarized<T extends ResponseView | CompactResponseBody>(response: T): response is Summarized<T> {
  return response.compacted && response.reason !== 'cleared'
}

/** The newest tool uses /v1/compact's clearing never clears (the API's own default). */
const CLEAR_KEEP_TOOL_USES = 3

/** A compaction run: its answer (by default whole; as the HTTP layer records, counts and logs it, a ResponseView), its phases' times and its cold layer. */
export interface CompactRun<R extends ResponseView | CompactResponseBody = CompactResponseBody> {
  response: R
  timings: PhaseTimings
  /** What the compaction removed, redacted, for the session's cold layer (with a session id and a cold layer only). */
  memory?: MemoryEntry[]
}

export interface RunContext {
  /** The API key's name ('' without auth). */
  keyName: string
  /** Aborted when the client goes away. */
  signal?: AbortSignal
  /**
   * The recall tool the summary turn names when the session has a cold layer: by default the `recall` tool
   * a client of /v1/compact adds (GET /v1/tools/recall); false where the model has none (its cold layer is
   * kept all the same, for the recall routes).
   */
  recallTool?: RecallNaming | false
  /** keep_tokens is where the cut is aimed, and the newest step is clipped only to fit the budget (a proxy's crossing). */
  clipToBudget?: boolean
}

/** The tool a compaction's summary note names: the one the run was given, `recall` by default, none where it was told none. */
function recallNamed(given: RecallNaming | false | undefined): RecallNaming | undefined {
  return given === undefined ? { tool: RECALL_TOOL_NAME } : given || undefined
}

/** What the compaction removed (and what the bound clipped from the tail), redacted like everything the service keeps. */
export function spanMemory(plan: CompactionPlan, messages: Message[], clips: Clip[], redactors: Redactors): MemoryEntry[] {
  const files = { modified: plan.ledger.filesModified.map((f) => f.path), read: plan.ledger.filesRead }
  return redactMemory(
    [...readMemory(plan.span, 0, files, redactors.redactBeforeClip), ...clippedMemory(messages, clips, redactors.redactBeforeClip)],
    redactors.redactParts
  )
}

/**
 * A compaction asked for, as the service takes it: the compact route's body once read (compactionInput), a
 * proxy's crossing or a compaction on demand as the proxy builds it. Its settings not yet defaulted (the
 * server's defaults apply where one is absent); its history in `format`, the Messages API's where absent.
 */
export interface CompactionInput {
  format?: Format
  messages: CompactRequestBody['messages']
  /** Counted only, never returned. */
  system?: CompactRequestBody['system']
  tools?: CompactRequestBody['tools']
  mode?: 'auto' | 'manual'
  budgetTokens?: number | 'off'
  keepTokens?: number
  keepTurns?: number
  instructions?: string
  sessionId?: string
  /** What the client's last request was billed for: the estimate is scaled to it. */
  usage?: CompactRequestBody['usage']
  recallHint?: string
  summarizer?: CompactRequestBody['summarizer']
  dryRun?: boolean
  strategy?: CompactRequestBody['strategy']
}

/** A /v1/compact body, checked against its schema, as the service takes it. */
export function compactionInput(body: CompactRequestBody): CompactionInput {
  const { budget_tokens, keep_tokens, keep_turns, session_id, recall_hint, dry_run, ...same } = body
  return {
    ...same,
    ...(budget_tokens !== undefined ? { budgetTokens: budget_tokens } : {}),
    ...(keep_tokens !== undefined ? { keepTokens: keep_tokens } : {}),
    ...(keep_turns !== undefined ? { keepTurns: keep_turns } : {}),
    ...(session_id !== undefined ? { sessionId: session_id } : {}),
    ...(recall_hint !== undefined ? { recallHint: recall_hint } : {}),
    ...(dry_run !== undefined ? { dryRun: dry_run } : {})
  }
}

/** A request whose history is the Messages API's, as the core reads it. */
type MessagesRequest = Omit<CompactionInput, 'messages' | 'format'> & { messages: Message[] }

/**
 * The whole path of one compaction, in the format the request names: a history in another API's format
 * is read into the core's turns, compacted, and given back in its own format (formats/).
 */
export async function runCompaction(body: CompactionInput, deps: CompactDeps, context: RunContext = { keyName: '' }): Promise<CompactRun> {
  const format = body.format ?? 'anthropic'
  if (format !== 'anthropic' && body.strategy !== undefined && body.strategy !== 'summarize')
    throw new InvalidRequestError(`strategy ${body.strategy} reads Messages API histories only (format anthropic)`, '/strategy')
  if (format === 'anthropic') return compactMessages({ ...body, messages: body.messages as Message[] }, deps, context)
  const rules = rulesOf(format)
  const items = body.messages as Record<string, unknown>[]
  const t0 = deps.now()
  const adapted = adaptHistory(items, rules)
  if ('kind' in adapted) throw new InvalidHistoryError(adapted)
  const adaptMs = deps.now() - t0
  const { format: _format, system: bodySystem, ...rest } = body
  // the history's own system messages and the body's `system` are both counted
  const own: Block[] = adapted.systemText === '' ? [] : [{ type: 'text', text: adapted.systemText }]
  const system = bodySystem === undefined ? own : typeof bodySystem === 'string' ? [...own, { type: 'text', text: bodySystem }] : [...own, ...bodySystem]
  let run: CompactRun
  try {
    run = await compactMessages({ ...rest, messages: adapted.messages, ...(system.length > 0 ? { system } : {}) }, deps, context)
  } catch (err) {
    // a problem the core found in a turn is told at the turn's first item
    if (err instanceof InvalidHistoryError)
      throw new InvalidHistoryError({
        ...err.problem,
        path: err.problem.path.replace(/^\/messages\/(\d+).*/, (_m, i: string) => `/messages/${adapted.starts[Number(i)] ?? i}`)
      })
    throw err
  }
  run.timings.validate += adaptMs
  const response = run.response
  if (!response.compacted) return { ...run, response: { ...response, kept_from: adapted.starts[response.kept_from] ?? items.length } }
  const given = givenBack(items, adapted, rules, response)
  return {
    ...run,
    response: {
      ...response,
      messages: given.items as Message[],
      kept_from: given.kept_from,
      clips: given.clips,
      stats: { ...response.stats, compacted_messages: given.compacted_messages, kept_messages: given.kept_messages }
    }
  }
}

/**
 * Clearing first (strategy clear or hybrid): the old tool results replaced by placeholders, oldest first,
 * until the history is at half the room under the budget (every one past the newest three, asked for by
 * hand), where that is enough: under the budget (clear) or at that target (hybrid). Undefined where it is
 * not (or nothing is over the budget): the history is then summarized as it came.
 */
function clearFirst(body: MessagesRequest, deps: CompactDeps, strategy: 'clear' | 'hybrid'): { outcome: ClearedOutcome; uses: ClearedUse[] } | undefined {
  if (body.dryRun) return undefined
  const manual = (body.mode ?? 'auto') === 'manual'
  const budget = body.budgetTokens ?? deps.defaults.budgetTokens
  const tokens = promptTokens(body.messages, body.system, body.tools)
  if (!manual && (budget === 'off' || tokens <= budget)) return undefined
  const fixed = promptTokens([], body.system, body.tools)
  const target = budget === 'off' ? undefined : fixed + Math.floor((budget - fixed) / 2)
  const done = clearToolUses(
    body.messages,
    {
      keep: CLEAR_KEEP_TOOL_USES,
      excludeTools: [RECALL_TOOL_NAME],
      clearInputs: false,
      clearAtLeast: manual || budget === 'off' ? 0 : Math.ceil(budget / 10),
      ...(target !== undefined && !manual ? { enough: tokens - target } : {})
    },
    (id) => clearedNote(body.sessionId !== undefined ? { tool: RECALL_TOOL_NAME } : undefined, id)
  )
  if (done.cleared.length === 0) return undefined
  const after = tokens - done.tokens
  if (budget !== 'off' && (strategy === 'hybrid' ? target !== undefined && after > target : after > budget)) return undefined
  const stats: CompactionStats = {
    raw_history_tokens: tokens,
    summary_tokens: 0,
    compacted_turns: 0,
    compacted_messages: 0,
    kept_messages: body.messages.length,
    kept_tokens: after - fixed,
    context_after_compaction: after,
    clipped_tool_results: 0,
    guard_added: 0,
    estimate_scale: 1,
    carried_context_tokens: 0,
    carried_context_dropped: 0
  }
  return {
    outcome: {
      compacted: true,
      reason: 'cleared',
      messages: done.messages,
      kept_from: 0,
      clips: [],
      cleared: done.cleared.map((c) => ({ message: c.message, tool_use_id: c.tool_use_id, tool: c.name, tokens: c.tokens })),
      stats,
      doctrine_version: DOCTRINE_VERSION
    },
    uses: done.cleared
  }
}

/** The cleared outputs as the cold layer keeps them: the call and its whole output, redacted, a passage at a time. */
export function clearedMemory(uses: readonly ClearedUse[]): MemoryEntry[] {
  const redactors = compactionRedactors()
  return redactMemory(clearedEntries(uses, redactors.redactBeforeClip), redactors.redactParts)
}

/** The whole path of one compaction of a Messages API history: validate, plan, summarize (or not), finish. */
async function compactMessages(body: MessagesRequest, deps: CompactDeps, context: RunContext): Promise<CompactRun> {
  const t0 = deps.now()
  const messages = body.messages
  const problem = validateHistory(messages)
  if (problem) throw new InvalidHistoryError(problem)
  const t1 = deps.now()

  const strategy = body.strategy ?? 'summarize'
  if (strategy !== 'summarize') {
    const cleared = clearFirst(body, deps, strategy)
    if (cleared) {
      const t2 = deps.now()
      const coldLayer = deps.coldLayer === true && body.sessionId !== undefined
      return {
        response: cleared.outcome,
        timings: { validate: t1 - t0, plan: t2 - t1, summarize: 0 },
        ...(coldLayer ? { memory: clearedMemory(cleared.uses) } : {})
      }
    }
  }

  const usage = body.usage
  const prompts = deps.conversations ? promptTexts(messages) : []
  const conversation = ConversationsText.conversation(body.sessionId, prompts)
  // One compaction's redactors remember what they find, so a secret seen anywhere is replaced everywhere.
  const redactors = compactionRedactors()
  const plan = planCompaction(
    {
      messages,
      system: body.system,
      tools: body.tools,
      mode: body.mode ?? 'auto',
      budgetTokens: body.budgetTokens ?? deps.defaults.budgetTokens,
      sizingBudgetTokens: typeof deps.defaults.budgetTokens === 'number' ? deps.defaults.budgetTokens : DEFAULT_BUDGET_TOKENS,
      keepTokens: body.keepTokens ?? deps.defaults.keepTokens,
      keepTurns: body.keepTurns ?? deps.defaults.keepTurns,
      usageInputTokens: usage ? usage.input_tokens + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0) : undefined,
      dryRun: body.dryRun ?? false,
      ...(context.clipToBudget ? { clipToBudget: true } : {}),
      ...(deps.conversations ? { commonText: deps.conversations.common(context.keyName, conversation) } : {})
    },
    redactors
  )
  // learned after this history was read, so that its own lines count for the next conversations only;
  // once this answer has gone, and before anything reads what was learned
  deps.conversations?.learnLater(context.keyName, conversation, prompts)
  if (plan.problem) throw new InvalidHistoryError(plan.problem)
  const t2 = deps.now()
  if (!plan.summarize) {
    const outcome = uncompacted(plan)
    return { response: { ...outcome, doctrine_version: DOCTRINE_VERSION }, timings: { validate: t1 - t0, plan: t2 - t1, summarize: 0 } }
  }

  const requested = body.summarizer ?? 'auto'
  // a model asked for by name must be the one the server has
  if (requested !== 'auto' && requested !== 'extractive' && (!deps.modelSummarizer || (requested !== 'model' && deps.modelSummarizer.kind !== requested))) {
    throw new SummarizerUnavailableError(requested, deps.modelSummarizer?.kind)
  }
  const summarizer = requested === 'extractive' || !deps.modelSummarizer ? deps.extractive : deps.modelSummarizer
  const result = await summarizer.summarize({
    plan,
    redactors,
    instructions: body.instructions,
    keyName: context.keyName,
    session: body.sessionId,
    signal: context.signal
  })
  // Without a key the extractive summary is the default, and the response says why no model wrote it (unless
  // the operator chose it: then it is no fallback).
  if (requested === 'auto' && !deps.modelSummarizer && deps.defaults.extractiveChosen !== true)
    result.report = { ...result.report, fallback_reason: 'no_api_key' }
  const coldLayer = deps.coldLayer === true && body.sessionId !== undefined
  const outcome = finishCompaction(
    plan,
    { id: deps.newId(), recallHint: body.recallHint, modelSections: result.sections, recallTool: coldLayer ? recallNamed(context.recallTool) : undefined },
    redactors
  )
  const t3 = deps.now()
  const report: SummarizerReport = { ...result.report, duration_ms: Math.round(result.report.duration_ms || t3 - t2) }
  return {
    response: { ...outcome, summarizer: report, doctrine_version: DOCTRINE_VERSION },
    timings: { validate: t1 - t0, plan: t2 - t1, summarize: t3 - t2 },
    ...(coldLayer ? { memory: spanMemory(plan, messages, outcome.clips, redactors) } : {})
  }
}
