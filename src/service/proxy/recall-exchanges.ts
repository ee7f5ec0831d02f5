import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { SessionOwner, Store } from '../../storage/store.js'
import { ANCHOR_TTL_MS } from '../../contract/defaults.js'
import type { StoredExchange } from '../../proxy/recall-tool.js'

/** Exchanges kept a conversation: the newest; an older answer the client sends back is forwarded as it sent it. */
export const MAX_EXCHANGES = 100
/** Conversations whose exchanges this process holds in memory. */
const MAX_CONVERSATIONS = 2_000

/**
 * What the upstream saw in place of the answers the client got (proxy/recall-tool.ts), kept with the
 * session's state: in memory, and in the store, sealed under the session's key and deleted with it, so
 * that the next process, or another replica where the store is shared, puts them back the same way.
 */

/** A conversation's recall state: whether the tool has been offered (from then on it always is), and its exchanges, oldest first. */
export interface RecallState {
  offered: boolean
  exchanges: StoredExchange[]
}

const NONE: RecallState = { offered: false, exchanges: [] }

export class RecallExchanges {
  private readonly known = new LRUCache<string, RecallState>({ max: MAX_CONVERSATIONS })
  /** Each conversation's write under way, which a read of the store waits for. */
  private readonly saving = new Map<string, Promise<void>>()

  constructor(
    private readonly store: Pick<Store, 'shared' | 'getState' | 'putState'>,
    private readonly onFault: (err: unknown) => void,
    private readonly now: () => number = Date.now
  ) {}

  private static key(conversation: string): string {
    return `recall:${createHash('sha256').update(conversation).digest('hex')}`
  }

  /** A conversation's state (read from the store where other replicas write it too, or where this process has not seen it). */
  async load(conversation: string): Promise<RecallState> {
    const here = this.known.get(conversation)
    if (here && this.store.shared !== true) return here
    try {
      await this.saving.get(conversation) // this process's own last write lands first
      const text = await this.store.getState(RecallExchanges.key(conversation), this.now())
      // where replicas share the store, a state held here that the store has not (every one held here was
      // saved: this process's own write landed above) was deleted with its session on another replica
      const saved = typeof text === 'string' ? (JSON.parse(text) as RecallState) : this.store.shared === true ? NONE : (here ?? NONE)
      this.known.set(conversation, saved)
      return saved
    } catch (err) {
      this.onFault(err)
      return here ?? NONE
    }
  }

  /** The tool offered to the conversation: from now on it always is (a tool list that flips costs the cache, and thinking made with it). */
  async offer(conversation: string, owner: SessionOwner): Promise<void> {
    const state = this.known.get(conversation) ?? NONE
    if (state.offered) return
    await this.save(conversation, { ...state, offered: true }, owner)
  }

  /** Adds one, at once in memory (the client's next request may come at once), then in the store. */
  async add(conversation: string, exchange: StoredExchange, owner: SessionOwner): Promise<void> {
    const state = this.known.get(conversation) ?? NONE
    const exchanges = [...state.exchanges.filter((e) => e.at !== exchange.at), exchange].slice(-MAX_EXCHANGES)
    await this.save(conversation, { offered: true, exchanges }, owner)
  }

  private async save(conversation: string, state: RecallState, owner: SessionOwner): Promise<void> {
    this.known.set(conversation, state)
    const write = this.store.putState(RecallExchanges.key(conversation), JSON.stringify(state), this.now() + ANCHOR_TTL_MS, owner).catch((err: unknown) => {
      this.onFault(err)
    })
    this.saving.set(conversation, write)
    await write
    if (this.saving.get(conversation) === write) this.saving.delete(conversation)
  }

  /** Forgets the conversations held here whose key begins with `prefix` (a session's deletion; the store's rows go with the session). */
  forget(prefix: string): void {
    for (const key of [...this.known.keys()]) if (key.startsWith(prefix)) this.known.delete(key)
  }
}
