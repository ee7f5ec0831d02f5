/**
 * The proxy's conversations as it remembers them: each conversation's state (its anchors, the summary written
 * ahead, its pace), the least recently used forgotten past a count or an idle time, and the anchors kept in the
 * store where the next process and the other replicas find them. The crossing and the write-ahead
 * (compactor.ts) read and change a conversation's state through this.
 */
import { createHash } from 'node:crypto'
import type { Anchor } from '../../proxy/anchors.js'
import { hashPrefix } from '../../proxy/anchors.js'
import { derivedSession } from '../../proxy/request.js'
import type { SessionOwner, Store } from '../../storage/store.js'
import { ANCHOR_TTL_MS, MAX_PROXY_SESSIONS, PROXY_SESSION_IDLE_MS } from '../../contract/defaults.js'
import type { CompactRun, ResponseView, Summarized } from '../compact.js'
import type { ProxyRequest } from './compactor.js'

/** A conversation's anchors as kept where the next process and the other replicas find them. */
export interface SavedConversation {
  current?: Anchor
  refined?: Anchor
  pending?: Pending
}

/** Where anchors are kept beyond this process: the store (SQLite, or PostgreSQL shared by replicas). */
export interface AnchorStore {
  /** Read by other replicas too: the saved anchors are read at every request, not only a conversation's first here. */
  shared: boolean
  load(key: string): Promise<SavedConversation | undefined>
  /** `owner`: the client's session, whose deletion deletes the anchors too. */
  save(key: string, saved: SavedConversation, owner?: SessionOwner): Promise<void>
}

/**
 * A conversation's anchors in the store, under a hash of its key (tenant, session, first message). They are
 * kept as JSON text, not as JSON the database may reorder, so that the summary turn comes back byte for byte.
 */
export function storedAnchors(store: Pick<Store, 'shared' | 'getState' | 'putState'>, now: () => number = Date.now): AnchorStore {
  const key = (conversation: string): string => `anchors:${createHash('sha256').update(conversation).digest('hex')}`
  return {
    shared: store.shared === true,
    load: async (conversation) => {
      const text = await store.getState(key(conversation), now())
      return typeof text === 'string' ? (JSON.parse(text) as SavedConversation) : undefined
    },
    save: (conversation, saved, owner) => store.putState(key(conversation), JSON.stringify(saved), now() + ANCHOR_TTL_MS, owner)
  }
}

export interface Pending extends Anchor {
  /** The estimate of the history when it was written. */
  atTokens: number
  /** The compaction that wrote it, without its messages (the anchor rebuilds them from the client's). */
  run: CompactRun<Summarized<ResponseView>>
}

/** How a conversation grows: what the next crossing's nearness is judged by. */
export interface Pace {
  /** The estimate of its last request, and when it came. */
  tokens: number
  at: number
  /** Tokens a request adds, and milliseconds between requests (moving averages; undefined until seen). */
  growth?: number
  interval?: number
}

export interface ConversationState {
  /** The conversation's key (conversationKey). */
  key: string
  /** The client's session it belongs to, if it named one. */
  owner?: SessionOwner
  /** Its session was deleted: work still in flight for it keeps nothing. */
  forgotten?: boolean
  /** Whether its saved anchors were read in this process. */
  loaded: boolean
  /** When a request of the session was last seen, and the one before (this process's). */
  seenAt: number
  previousAt?: number
  /** The summary sent now in place of the first turns. */
  current?: Anchor
  /** A model's summary of the history's first `cut` messages (at most the current cut): the base the next crossing merges from. */
  refined?: Anchor
  /** A summary written in the background, ahead of the crossing. */
  pending?: Pending
  /** The background summary in flight. */
  working?: Promise<void>
  /** The write of its anchors in flight. */
  saving?: Promise<void>
  pace?: Pace
  /** Requests forwarded over the budget, uncompacted, since the last crossing: a compaction would not have paid back (COMPACT_LIMIT). */
  waited?: number
}

export interface ProxyConversationsOptions {
  /** Where anchors outlive the process; only in memory without. */
  anchors?: AnchorStore
  /** A store fault while anchors were read or written (the proxy goes on from memory). */
  onAnchorFault?: (err: unknown) => void
  /** The clock of the conversations' pace (tests move it). */
  clock?: () => number
  maxSessions?: number
}

export class ProxyConversations {
  private readonly conversations = new Map<string, ConversationState>()
  /** Anchor writes in flight. */
  private readonly writes = new Set<Promise<void>>()

  constructor(private readonly options: ProxyConversationsOptions) {}

  /** The request's conversation, seen now (the most recently used). */
  stateOf(request: Pick<ProxyRequest, 'keyName' | 'session' | 'messages' | 'system'>): ConversationState {
    const key = conversationKey(request)
    const now = (this.options.clock ?? Date.now)()
    let state = this.conversations.get(key)
    if (state) {
      this.conversations.delete(key)
      state.previousAt = state.seenAt
    } else
      state = {
        key,
        loaded: false,
        seenAt: now,
        ...(request.session !== undefined ? { owner: { key_name: request.keyName, session_id: request.session } } : {})
      }
    state.seenAt = now
    this.conversations.set(key, state) // most recently used last
    // The least recently used come first: forget those over the count, and those idle too long.
    const max = this.options.maxSessions ?? MAX_PROXY_SESSIONS
    for (const [k, s] of this.conversations) {
      if (this.conversations.size <= max && now - s.seenAt < PROXY_SESSION_IDLE_MS) break
      this.conversations.delete(k)
    }
    return state
  }

  /** The conversation's saved anchors, read once here (at every request where other replicas write them too). */
  async load(state: ConversationState): Promise<void> {
    const store = this.options.anchors
    if (!store || (state.loaded && !store.shared)) return
    state.loaded = true
    try {
      await state.saving // this process's own last write lands first
      const saved = await store.load(state.key)
      if (!saved) {
        // where replicas share the store, anchors this process holds and the store has not were deleted
        // with their session (every anchor held here was saved: this process's own writes landed above)
        if (store.shared && (state.current || state.pending)) this.reset(state)
        return
      }
      state.current = saved.current
      state.refined = saved.refined
      state.pending = saved.pending
    } catch (err) {
      this.options.onAnchorFault?.(err)
    }
  }

  /** Keeps the conversation's anchors where the next process and the other replicas find them. */
  persist(state: ConversationState): void {
    const store = this.options.anchors
    if (!store || state.forgotten) return
    const saved: SavedConversation = { current: state.current, refined: state.refined, pending: state.pending }
    // One write at a time per conversation, in the order they were made.
    const job = (state.saving ?? Promise.resolve())
      // (the conversation's last request its time: a deletion of its session since refuses what work begun before it keeps)
      .then(() => store.save(state.key, saved, state.owner ? { ...state.owner, since_ms: state.seenAt } : undefined))
      .catch((err: unknown) => this.options.onAnchorFault?.(err))
      .finally(() => {
        this.writes.delete(job)
        if (state.saving === job) state.saving = undefined
      })
    state.saving = job
    this.writes.add(job)
  }

  reset(state: ConversationState): void {
    state.current = undefined
    state.refined = undefined
    state.pending = undefined
  }

  /**
   * Forgets a tenant's session's conversations here (their anchors and summaries written ahead): it is
   * being deleted. Resolves once their anchor writes in flight have landed, so that a deletion after it
   * finds them; work still running for them keeps nothing.
   */
  async forget(keyName: string, session: string): Promise<number> {
    const landing: Promise<void>[] = []
    let forgotten = 0
    for (const [key, state] of this.conversations) {
      if (state.owner?.key_name !== keyName || state.owner.session_id !== session) continue
      forgotten++
      this.conversations.delete(key)
      state.forgotten = true
      this.reset(state)
      if (state.saving) landing.push(state.saving)
    }
    await Promise.all(landing)
    return forgotten
  }

  /** Conversations remembered now. */
  get size(): number {
    return this.conversations.size
  }

  /** The anchor writes in flight now. */
  get inFlight(): Promise<void>[] {
    return [...this.writes]
  }
}

/**
 * The conversation a request belongs to, per tenant: within the client's session, the one its first
 * message opens (an agent's main loop and each of its subagents send their own first message, and it does
 * not change as a conversation grows); without a session, the one named by its system prompt and first message.
 */
export function conversationKey(request: Pick<ProxyRequest, 'keyName' | 'session' | 'messages' | 'system'>): string {
  if (request.session !== undefined)
    return `${request.keyName}\u0000s:${request.session}\u0000${hashPrefix(request.messages, Math.min(1, request.messages.length))}`
  return `${request.keyName}\u0000h:${derivedSession(request)}`
}
