import { sliceHead } from './clip.js'
import { extractiveSections } from './extractive.js'
import { boundFiles, fitSections } from './fit.js'
import { type Ledger, readLedger, userText } from './ledger.js'
import { guardSections, mergeSections } from './merge.js'
import { type Clip, type CutPlan, clipToFit, planCut } from './plan.js'
import { CORE_REDACTORS, type Redact, type RedactMany, type Redactors } from './redact.js'
import { DEFAULT_RENDER, type RenderedSpan, findPriorSummaries, renderSpan } from './render.js'
import { LIST_SECTIONS, type SummarySections } from './sections.js'
import { type SummaryHeader, formatSummary, oneLine } from './summary-text.js'
import { CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, estimateScale, rawMessageTokens, rawSystemTokens, scaled, textTokens } from './tokens.js'
import { type RecallNaming, assembledHead, summaryBlocks, summaryNote } from './turn.js'
import { type CarriedContext, NO_CONTEXT, carriedContext, carriedTokens } from './context.js'
import { type Block, type Message, type SystemPrompt, blocksOf, isPromptMessage, isTextBlock } from './types.js'
import { newestOpaque } from './opaque.js'
import { type HistoryProblem, place, pointer } from './validate.js'
import { at } from './at.js'
import type { CommonText } from './harness.js'

export type Mode = 'auto' | 'manual'
export type Reason = 'over_budget' | 'under_budget' | 'manual' | 'disabled' | 'nothing_to_compact' | 'dry_run' | 'cleared' | 'cache_lapsed'

/** The summary may take at most this share of the budget. */
export const SUMMARY_SHARE = 10
/**
 * The least a summary turn needs (its header, the server's note, a short objective and the newest
 * request): under a budget of a few thousand tokens a tenth is less than that, and the tail is then
 * sized for this much instead, so that the context still fits the budget.
 */
export const SUMMARY_FLOOR_TOKENS = 300
/**
 * Where the user's own words would take more than half of the summary's share, the summary may grow to
 * twice their size, up to this share of the budget, taken from the tail's room: the user's requests,
 * verbatim, are what a summary must not lose, and a long session's can pass a tenth of the budget.
 */
export const SUMMARY_MAX_SHARE = 5
/** The tail may take at most this share of the budget unless the client says otherwise. */
export const KEEP_SHARE = 3
/** The context carried over verbatim (system messages, harness context) may take at most this share of the budget. */
export const CARRIED_SHARE = 8

export interface CompactionInput {
  messages: Message[]
  system?: SystemPrompt
  tools?: unknown[]
  mode: Mode
  /** The prompt size that triggers auto compaction, or 'off'. */
  budgetTokens: number | 'off'
  /** The budget that sizes the tail and summary when `budgetTokens` is 'off'. */
  sizingBudgetTokens: number
  keepTokens?: number
  keepTurns: number
  usageInputTokens?: number
  dryRun: boolean
  /** Text the same key's other conversations sent (by line fingerprint): harness text, left out of the requests. */
  commonText?: CommonText
  /**
   * keepTokens is where the cut is aimed, not the tail's bound: the newest step is clipped only when the
   * budget would not hold it beside the summary as it is written (a proxy's crossing), never to keepTokens.
   */
  clipToBudget?: boolean
}

export interface CompactionStats {
  raw_history_tokens: number
  summary_tokens: number
  compacted_turns: number
  compacted_messages: number
  kept_messages: number
  kept_tokens: number
  context_after_compaction: number
  /** Every clip the bound made in the tail, of any kind (the name is older than the other kinds). */
  clipped_tool_results: number
  guard_added: number
  estimate_scale: number
  /** Tokens of the span's system messages and harness context carried over verbatim (in context_after_compaction). */
  carried_context_tokens: number
  /** Kinds of such context left out because they would pass the bound of what is carried. */
  carried_context_dropped: number
}

/** Everything decided before a summarizer is called, as data; the redaction its texts go through is passed beside it (Redactors). */
export interface CompactionPlan {
  reason: Reason
  /** True when there is a span to summarize and the caller asked for a summary (not a dry run). */
  summarize: boolean
  scale: number
  fixedTokens: number
  rawHistoryTokens: number
  cut: CutPlan
  /** The tail's hard bound as applied: keep_tokens, tightened so that the result fits the budget. */
  tailBound: number
  summaryMaxTokens: number
  /** The messages to summarize; a model summarizer renders them (renderSpan), the extractive one never does. */
  span: Message[]
  ledger: Ledger
  /** The span's system messages and harness context, carried into the compacted history verbatim. */
  context: CarriedContext
  /** The prior summaries of the span, merged, redacted. */
  prior: SummarySections | undefined
  priorTurns: number
  latestAssistantText: string
  compactedTurns: number
  /** Set when the tail cannot be brought within its bound: the request is refused, naming the place. */
  problem?: HistoryProblem
  /**
   * With clipToBudget, where the tail was clipped: the history unclipped and the room the tail and summary
   * share, so that the tail is clipped again against the summary's real size once it is written.
   */
  reclip?: { messages: readonly Message[]; tokens: readonly number[]; room: number; budget: number }
  /**
   * The span as a model reads it, rendered and redacted already where the plan was made (a worker): the plan
   * then goes to the thread that calls the model without its span, and nothing is redacted there again.
   */
  rendered?: RenderedSpan
}

/** The span as a model reads it: rendered, clipped, every text redacted first. */
export function renderedSpan(plan: CompactionPlan, redactors: Redactors = CORE_REDACTORS): RenderedSpan {
  if (plan.rendered) return plan.rendered
  // Harness text by markup and repetition only: what the model is sent (and the summary cache's key) must
  // not depend on what one replica has seen of other conversations, or replicas would not share a summary.
  return renderSpan(plan.span, 0, { ...DEFAULT_RENDER, redactParts: redactors.redactParts, redactBeforeClip: redactors.redactBeforeClip })
}

function latestAssistantText(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = at(messages, i)
    if (m.role !== 'assistant') continue
    const text = blocksOf(m)
      .filter(isTextBlock)
      .map((b) => b.text)
      .join('\n')
      .trim()
    if (text) return text
  }
  return ''
}

/** Every text of the sections redacted at once (one pass of a slow ruleset, not one per item). */
export function redactSections(s: SummarySections, redactMany: RedactMany): SummarySections {
  // concat, not flatMap: concat copies at memory speed, flatMap calls a function an item
  const texts = [s.objective].concat(...LIST_SECTIONS.map((key) => s[key]))
  const redacted = redactMany(texts)
  const out = { objective: at(redacted, 0) } as SummarySections
  let k = 1
  for (const key of LIST_SECTIONS) {
    out[key] = redacted.slice(k, k + s[key].length)
    k += s[key].length
  }
  return out
}

/** The plan of a compaction; `redactors` redact the prior summaries it carries (the core's own patterns by default). */
export function planCompaction(input: CompactionInput, redactors: Redactors = CORE_REDACTORS): CompactionPlan {
  const { messages } = input
  const rawFixed = rawSystemTokens(input.system, input.tools)
  const raw = messages.map(rawMessageTokens)
  const scale = estimateScale(rawFixed + raw.reduce((a, b) => a + b, 0), input.usageInputTokens)
  const tokens = raw.map((r) => scaled(r, scale))
  const fixedTokens = scaled(rawFixed, scale)
  const rawHistoryTokens = fixedTokens + tokens.reduce((a, b) => a + b, 0)

  const budget = input.budgetTokens === 'off' ? undefined : input.budgetTokens
  const sizing = budget ?? input.sizingBudgetTokens
  const keepTokens = input.keepTokens ?? Math.floor(sizing / KEEP_SHARE)
  // The floor is of the summary's own text, which the calibration scales like any other: reserved scaled.
  let summaryMaxTokens = Math.max(Math.ceil(SUMMARY_FLOOR_TOKENS * scale), Math.floor(sizing / SUMMARY_SHARE))
  const contextMaxTokens = Math.floor(sizing / CARRIED_SHARE)
  // The room the summary leaves for the tail and the context carried over.
  const room = budget === undefined ? undefined : budget - fixedTokens - summaryMaxTokens
  let tailBound = Math.max(0, room === undefined ? keepTokens : Math.min(keepTokens, room))
  // with clipToBudget, the bound the newest step is clipped to: all the room the summary's share leaves
  let clipBound = input.clipToBudget && room !== undefined ? Math.max(tailBound, room) : undefined

  let reason: Reason
  if (input.mode === 'manual') reason = 'manual'
  else if (budget === undefined) reason = 'disabled'
  else reason = rawHistoryTokens > budget ? 'over_budget' : 'under_budget'

  const wantsCut = reason === 'manual' || reason === 'over_budget'
  // what the client cannot read is never summarized: the newest such block and all after it are kept
  const opaqueAt = newestOpaque(messages)
  const maxCut = opaqueAt >= 0 ? opaqueAt : undefined
  const cutAt = (bound: number): CutPlan => {
    const planned = planCut(messages, tokens, {
      keepTokens: bound,
      keepTurns: input.keepTurns,
      scale,
      ...(clipBound !== undefined ? { clipTokens: Math.max(bound, clipBound) } : {}),
      ...(maxCut !== undefined ? { maxCut } : {})
    })
    // where keeping it is more than the bound holds, the history is left as it is (not refused: it is the client's)
    return planned.heldBack && planned.overBound ? { cut: 0, tail: [...messages], tailTokens: rawHistoryTokens - fixedTokens, clips: [] } : planned
  }
  let cut = wantsCut ? cutAt(tailBound) : { cut: 0, tail: [...messages], tailTokens: rawHistoryTokens - fixedTokens, clips: [] as Clip[] }
  // The context the span carries over comes first: where it and the tail would not both fit, the tail
  // is cut again within what the context leaves, and the context then takes at most the room left.
  let context = wantsCut ? carriedContext(messages.slice(0, cut.cut), contextMaxTokens, scale) : NO_CONTEXT
  if (room !== undefined && context !== NO_CONTEXT) {
    const need = carriedTokens(context, scale)
    if (cut.tailTokens + need > room) {
      tailBound = Math.max(0, Math.min(tailBound, room - need))
      if (clipBound !== undefined) clipBound = Math.max(0, Math.min(clipBound, room - need))
      cut = cutAt(tailBound)
    }
    context = carriedContext(messages.slice(0, cut.cut), Math.min(contextMaxTokens, Math.max(0, room - cut.tailTokens)), scale)
  }
  let ledger = readLedger(messages.slice(0, cut.cut), 0, input.commonText)
  // the user's words claim room first: a summary share they would fill more than half of grows, from the tail's room
  const userWords = ledger.userRequests.reduce((n, r) => n + textTokens(r.text) + 4, 0)
  if (wantsCut && budget !== undefined && 2 * scaled(userWords, scale) > summaryMaxTokens) {
    summaryMaxTokens = Math.max(summaryMaxTokens, Math.min(2 * scaled(userWords, scale), Math.floor(sizing / SUMMARY_MAX_SHARE)))
    const left = budget - fixedTokens - summaryMaxTokens - (context === NO_CONTEXT ? 0 : carriedTokens(context, scale))
    if (cut.tailTokens > left) {
      tailBound = Math.max(0, Math.min(tailBound, left))
      if (clipBound !== undefined) clipBound = Math.max(0, Math.min(clipBound, left))
      cut = cutAt(tailBound)
      context = carriedContext(
        messages.slice(0, cut.cut),
        Math.min(contextMaxTokens, Math.max(0, budget - fixedTokens - summaryMaxTokens - cut.tailTokens)),
        scale
      )
      ledger = readLedger(messages.slice(0, cut.cut), 0, input.commonText)
    }
  }
  if (wantsCut && cut.cut === 0) reason = 'nothing_to_compact'
  else if (wantsCut && input.dryRun) reason = 'dry_run'

  const appliedBound = clipBound === undefined ? tailBound : Math.max(tailBound, clipBound)
  const problem = wantsCut && cut.cut > 0 && cut.overBound ? unfitProblem(cut, appliedBound, budget, fixedTokens, summaryMaxTokens) : undefined
  const reclip =
    clipBound !== undefined && budget !== undefined && cut.clips.length > 0
      ? { messages, tokens, room: budget - fixedTokens - (context === NO_CONTEXT ? 0 : carriedTokens(context, scale)), budget }
      : undefined

  const span = messages.slice(0, cut.cut)
  const priorSummaries = findPriorSummaries(span)
  const priors = priorSummaries.map((p) => p.sections)
  const prior =
    priors.length > 0
      ? redactSections(
          priors.reduce((a, b) => mergeSections(a, b)),
          redactors.redactParts
        )
      : undefined
  return {
    reason,
    summarize: wantsCut && cut.cut > 0 && !input.dryRun,
    scale,
    fixedTokens,
    rawHistoryTokens,
    cut,
    tailBound: appliedBound,
    summaryMaxTokens,
    span,
    ledger,
    context,
    prior,
    priorTurns: priorSummaries.reduce((n, p) => n + p.compactedTurns, 0),
    latestAssistantText: latestAssistantText(span),
    compactedTurns: span.filter((m) => isPromptMessage(m) && userText(m) !== '').length,
    ...(problem ? { problem } : {}),
    ...(reclip ? { reclip } : {})
  }
}

/** Why the newest step cannot be kept within the bound even with every text of it clipped to a marker. */
function unfitProblem(cut: CutPlan, tailBound: number, budget: number | undefined, fixedTokens: number, summaryMaxTokens: number): HistoryProblem {
  const room =
    budget === undefined
      ? `keep_tokens (${tailBound})`
      : `the ${tailBound} tokens left for it (budget_tokens ${budget}, less ${fixedTokens} for system and tools and ${summaryMaxTokens} for the summary)`
  return {
    kind: 'history',
    path: pointer(cut.cut),
    message: `${place(cut.cut)}: the newest step needs ${cut.tailTokens} tokens even with every text of it clipped, over ${room}; raise budget_tokens or keep_tokens, or send less in it`
  }
}

export interface SummaryResult {
  id: string
  text: string
  sections: SummarySections
}

interface OutcomeFigures {
  reason: Reason
  kept_from: number
  clips: Clip[]
  stats: CompactionStats
}

/** A compaction: the new history and its summary. */
export interface Compacted extends OutcomeFigures {
  compacted: true
  messages: Message[]
  summary: SummaryResult
}

/** No compaction (under budget, disabled, nothing to compact, a dry run): the figures only. */
export interface NotCompacted extends OutcomeFigures {
  compacted: false
}

/** Tagged by `compacted`: a caller that checks it has the messages and the summary without assertions. */
export type CompactionOutcome = Compacted | NotCompacted

export interface FinishOptions {
  /** The summary's id, made by the caller (the core has no clock and no randomness). */
  id: string
  recallHint?: string
  /** The recall tool the model has (the session has a cold layer): the summary turn names it; absent, it names none. */
  recallTool?: RecallNaming
  /** Sections a model wrote; undefined for the extractive summary. */
  modelSections?: SummarySections
}

function roundScale(scale: number): number {
  return Number(scale.toFixed(4))
}

/** The figures of a plan that did not compact. */
export function uncompacted(plan: CompactionPlan): NotCompacted {
  const kept = plan.reason === 'dry_run' ? plan.cut.tail : plan.span.concat(plan.cut.tail)
  const keptTokens = plan.reason === 'dry_run' ? plan.cut.tailTokens : plan.rawHistoryTokens - plan.fixedTokens
  return {
    compacted: false,
    reason: plan.reason,
    kept_from: plan.reason === 'dry_run' ? plan.cut.cut : 0,
    clips: plan.reason === 'dry_run' ? plan.cut.clips : [],
    stats: {
      raw_history_tokens: plan.rawHistoryTokens,
      summary_tokens: 0,
      compacted_turns: plan.reason === 'dry_run' ? plan.compactedTurns : 0,
      compacted_messages: plan.reason === 'dry_run' ? plan.cut.cut : 0,
      kept_messages: kept.length,
      kept_tokens: keptTokens,
      context_after_compaction: plan.rawHistoryTokens,
      clipped_tool_results: plan.reason === 'dry_run' ? plan.cut.clips.length : 0,
      guard_added: 0,
      estimate_scale: roundScale(plan.scale),
      carried_context_tokens: 0,
      carried_context_dropped: 0
    }
  }
}

/** The share of the summary's room the client's recall hint may take at most, so that the bound holds. */
const RECALL_HINT_SHARE = 0.25
/** Tokens kept beside the note's own estimate for the summary turn's framing around it. */
const NOTE_FRAMING_TOKENS = 8

/** The summary's sections: the model's (or the ledger's, extractive), merged into the prior summary, checked against the ledger. */
function summarySections(plan: CompactionPlan, options: FinishOptions): ReturnType<typeof guardSections> {
  const written = options.modelSections ?? extractiveSections(plan.ledger, plan.latestAssistantText)
  const merged = plan.prior
    ? mergeSections(
        plan.prior,
        written,
        plan.ledger.userRequests.map((r) => r.text)
      )
    : written
  return guardSections(merged, plan.ledger)
}

/** The recall hint as it is sent (redacted, within its share), and the room left for the summary's text, in unscaled tokens. */
function summaryRoom(plan: CompactionPlan, options: FinishOptions, redact: Redact): { recallHint: string | undefined; textBudget: number } {
  const room = Math.floor(plan.summaryMaxTokens / plan.scale)
  const hintChars = Math.floor(room * CHARS_PER_TOKEN * RECALL_HINT_SHARE)
  const hint = options.recallHint === undefined ? undefined : redact(options.recallHint)
  const recallHint = hint && hint.length > hintChars ? `${sliceHead(hint, hintChars - 1)}…` : hint
  const noteTokens = textTokens(summaryNote(recallHint, options.recallTool)) + MESSAGE_OVERHEAD_TOKENS + NOTE_FRAMING_TOKENS
  return { recallHint, textBudget: Math.max(0, room - noteTokens) }
}

/**
 * The summary's text within its room: files no fit could keep counted (not redacted), every text redacted,
 * the sections fitted, then formatted. The objective is one line, as the text form holds it, so that the
 * text parses back to these sections.
 */
function summaryText(
  sections: SummarySections,
  textBudget: number,
  header: SummaryHeader,
  redactParts: RedactMany
): { text: string; sections: SummarySections } {
  const bounded = boundFiles({ ...sections, objective: oneLine(sections.objective) }, textBudget)
  const fitted = fitSections(redactSections(bounded.sections, redactParts), textBudget, header, bounded.omitted)
  return { text: formatSummary(fitted, header), sections: fitted }
}

/** The compacted history (the summary turn and the carried context in front of the kept tail) and its tokens; only the messages that took the head in are counted anew. */
function compactedHistory(plan: CompactionPlan, blocks: Block[]): { messages: Message[]; tokens: number } {
  const head = { user: [...blocks, ...plan.context.user], system: plan.context.system }
  const tail = plan.cut.tail
  const { messages: headMessages, replaced } = assembledHead(head, tail)
  let tokens = plan.cut.tailTokens
  for (let i = 0; i < replaced; i++) tokens -= scaled(rawMessageTokens(at(tail, i)), plan.scale)
  for (const m of headMessages) tokens += scaled(rawMessageTokens(m), plan.scale)
  return { messages: headMessages.concat(tail.slice(replaced)), tokens }
}

/** Room kept beside the summary turn's own estimate when the tail is clipped again: its framing where it joins the tail's first message. */
const RECLIP_SLACK_TOKENS = 2 * MESSAGE_OVERHEAD_TOKENS

/**
 * The compacted history; with clipToBudget, the tail clipped again against the summary as written (which
 * is often far smaller than its share), so that the newest step loses only what the budget requires. The
 * bound stays hard: where the tail clipped anew would not fit after all, the first clip stands.
 */
function withTailClippedToFit(plan: CompactionPlan, blocks: Block[], summaryTokens: number): { plan: CompactionPlan; messages: Message[]; tokens: number } {
  const first = compactedHistory(plan, blocks)
  const { reclip } = plan
  if (!reclip) return { plan, ...first }
  const left = reclip.room - summaryTokens - RECLIP_SLACK_TOKENS
  if (left <= plan.cut.tailTokens) return { plan, ...first }
  const cut = clipToFit(reclip.messages, plan.cut.cut, reclip.tokens, left, plan.scale)
  if (cut.overBound) return { plan, ...first }
  const wider = { ...plan, cut }
  const second = compactedHistory(wider, blocks)
  return plan.fixedTokens + second.tokens <= reclip.budget ? { plan: wider, ...second } : { plan, ...first }
}

/**
 * Turns a plan and a summary (a model's sections, or none for the extractive one) into the compacted
 * history: prior facts merged, the guard applied, secrets redacted with `redactors`, the summary fitted to its budget.
 */
export function finishCompaction(given: CompactionPlan, options: FinishOptions, redactors: Redactors = CORE_REDACTORS): Compacted {
  let plan = given
  const guarded = summarySections(plan, options)
  const header = { id: options.id, compactedTurns: plan.priorTurns + plan.compactedTurns }
  const { recallHint, textBudget } = summaryRoom(plan, options, redactors.redact)
  const { text, sections: fitted } = summaryText(guarded.sections, textBudget, header, redactors.redactParts)
  const blocks = summaryBlocks(text, recallHint, options.recallTool)
  const summaryTokens = scaled(rawMessageTokens({ role: 'user', content: blocks }), plan.scale)
  const { plan: final, messages, tokens: outputTokens } = withTailClippedToFit(plan, blocks, summaryTokens)
  plan = final
  return {
    compacted: true,
    reason: plan.reason,
    messages,
    kept_from: plan.cut.cut,
    summary: { id: options.id, text, sections: fitted },
    clips: plan.cut.clips,
    stats: {
      raw_history_tokens: plan.rawHistoryTokens,
      summary_tokens: summaryTokens,
      compacted_turns: plan.compactedTurns,
      compacted_messages: plan.cut.cut,
      kept_messages: plan.cut.tail.length,
      kept_tokens: plan.cut.tailTokens,
      context_after_compaction: plan.fixedTokens + outputTokens,
      clipped_tool_results: plan.cut.clips.length,
      guard_added: options.modelSections ? guarded.added : 0,
      estimate_scale: roundScale(plan.scale),
      carried_context_tokens: carriedTokens(plan.context, plan.scale),
      carried_context_dropped: plan.context.dropped
    }
  }
}
