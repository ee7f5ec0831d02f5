/**
 * Clearing as the proxy's first tier (COMPACT_STRATEGY `clear` or `hybrid`): when a conversation crosses its
 * budget, its old tool results are replaced by placeholders (compaction/clear.ts) before any turn is
 * summarized. What a conversation has cleared is kept and applied again to each of its requests (a
 * placeholder is a pure function of its call and output: the prefix is byte for byte the same), so the
 * prompt changes at crossings only, and each crossing clears enough to land at the compactor's target, or at
 * least a tenth of the budget: a cache miss bought for little is not bought. Where clearing cannot bring the
 * context to its target (hybrid) or under its budget (clear), the conversation is left to the compactor
 * from then on, its cleared results as they are: a summary replaces turns. Kept in this process.
 */
import {
  type ClearedUse,
  type Message,
  PROXY_RECALL_TOOL,
  RECALL_TOOL_NAME,
  type Rewrite,
  clearToolUses,
  clearedNote,
  promptTokens,
  unbindThinking
} from '../compaction/index.js'
import type { ProxyParts } from './request.js'

export type Strategy = 'summarize' | 'clear' | 'hybrid'

/** The newest tool uses never cleared (the API's own default). */
export const CLEAR_KEEP_TOOL_USES = 3
/** The least a crossing clears, as a share of the budget. */
export const CLEAR_AT_LEAST_SHARE = 0.1
/** Conversations remembered (the oldest forgotten first: one forgotten clears again at its next crossing). */
const MAX_CONVERSATIONS = 10_000

interface Conversation {
  cleared: Set<string>
  /** Each clearing's first changed message and the client's message count then: the thinking it made stale (compaction/thinking.ts). */
  rewrites: Rewrite[]
  /** Clearing could not do it: the compactor summarizes this conversation from now on. */
  summarizing: boolean
}

/** What the tier did to a request: its messages as they go on, whether they differ from the client's, every use cleared in them, and what it newly cleared. */
export interface Cleared {
  messages: Message[]
  changed: boolean
  uses: ClearedUse[]
  newly: ClearedUse[]
  tokens: number
}

export class ClearingTier {
  private readonly conversations = new Map<string, Conversation>()

  constructor(
    readonly strategy: Exclude<Strategy, 'summarize'>,
    /** Where a crossing lands: the compactor's target for this request's budget. */
    private readonly landing: (parts: ProxyParts, budgetTokens: number) => number
  ) {}

  /** The request's messages with its conversation's clearing applied, and, past its budget, new clearing where that is enough. */
  apply(
    key: string,
    parts: ProxyParts,
    budgetTokens: number | 'off',
    fixed?: (message: number, block: number) => boolean,
    /** What a placeholder says of where the output is kept (the tool the conversation's model has to get it back, or none). */
    recallNote: (toolUseId: string) => string = (id) => clearedNote(undefined, id),
    /** A first clearing adds the recall tool to the request: every thinking block before it was made on another prefix. */
    toolAdded = false
  ): Cleared {
    const conversation = this.conversation(key)
    let messages = parts.messages
    let changed = false
    let uses: ClearedUse[] = []
    if (conversation.cleared.size > 0) {
      const again = clearToolUses(
        messages,
        { keep: 0, excludeTools: [], clearInputs: false, clearAtLeast: 0, only: conversation.cleared, ...(fixed ? { fixed } : {}) },
        recallNote
      )
      if (again.cleared.length > 0) {
        messages = again.messages
        changed = true
        uses = again.cleared
      }
    }
    const tokens = promptTokens(messages, parts.system, parts.tools)
    if (budgetTokens === 'off' || tokens <= budgetTokens || conversation.summarizing)
      return { messages: changed ? this.unbound(parts, conversation, messages) : messages, changed, uses, newly: [], tokens }
    const target = this.landing(parts, budgetTokens)
    const done = clearToolUses(
      messages,
      {
        keep: CLEAR_KEEP_TOOL_USES,
        excludeTools: [RECALL_TOOL_NAME, PROXY_RECALL_TOOL],
        clearInputs: false,
        clearAtLeast: Math.ceil(CLEAR_AT_LEAST_SHARE * budgetTokens),
        enough: tokens - target,
        ...(fixed ? { fixed } : {})
      },
      recallNote
    )
    const after = tokens - done.tokens
    const enough = this.strategy === 'hybrid' ? after <= target : after <= budgetTokens
    if (done.cleared.length === 0 || !enough) {
      conversation.summarizing = true
      return { messages: changed ? this.unbound(parts, conversation, messages) : messages, changed, uses, newly: [], tokens }
    }
    for (const c of done.cleared) conversation.cleared.add(c.tool_use_id)
    const from = toolAdded && conversation.rewrites.length === 0 ? 0 : Math.min(...done.cleared.map((c) => c.message))
    conversation.rewrites.push({ from, bound: parts.messages.length })
    return { messages: this.unbound(parts, conversation, done.messages), changed: true, uses: [...uses, ...done.cleared], newly: done.cleared, tokens: after }
  }

  /** The cleared messages with the thinking each clearing made stale taken out, where the model checks thinking against its prefix. */
  private unbound(parts: ProxyParts, conversation: Conversation, messages: Message[]): Message[] {
    return parts.unbindThinking ? unbindThinking(messages, conversation.rewrites).messages : messages
  }

  /** Forgets a session's conversations (its deletion). */
  forget(prefix: string): void {
    for (const key of this.conversations.keys()) if (key.startsWith(prefix)) this.conversations.delete(key)
  }

  private conversation(key: string): Conversation {
    let c = this.conversations.get(key)
    if (c) {
      // most recently used last: the oldest is forgotten first
      this.conversations.delete(key)
      this.conversations.set(key, c)
      return c
    }
    c = { cleared: new Set(), rewrites: [], summarizing: false }
    this.conversations.set(key, c)
    if (this.conversations.size > MAX_CONVERSATIONS) {
      const oldest = this.conversations.keys().next()
      if (!oldest.done) this.conversations.delete(oldest.value)
    }
    return c
  }
}
