import { describe, expect, it } from 'vitest'
import { PROXY_SESSION_IDLE_MS } from '../../../src/contract/defaults.js'
import { type AnchorStore, ProxyConversations, type SavedConversation, conversationKey } from '../../../src/service/proxy/conversations.js'
import { user } from '../../helpers/history.js'

const anchor = { cut: 2, prefixHash: 'h', head: { user: [{ type: 'text' as const, text: 'summary' }], system: [] }, summaryId: 'cmp_1' }
const request = (session: string, first = 'Fix the parser') => ({ keyName: 'k', session, messages: [user(first), user('Go on')] })

/** An anchor store in memory whose writes wait until `release` (a slow store), counting what it was asked. */
function memoryStore(): AnchorStore & { saved: Map<string, SavedConversation>; release: () => void; saves: number } {
  const saved = new Map<string, SavedConversation>()
  let release: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (release = resolve))
  const store = {
    shared: false,
    saved,
    saves: 0,
    release: () => release(),
    load: async (key: string) => saved.get(key),
    save: async (key: string, value: SavedConversation) => {
      store.saves++
      await gate
      saved.set(key, value)
    }
  }
  return store
}

describe("the proxy's conversations", () => {
  it('keeps one state per conversation, forgetting the least recently used past the count and those idle too long', () => {
    let now = 0
    const conversations = new ProxyConversations({ maxSessions: 2, clock: () => now })
    const a = conversations.stateOf(request('a'))
    conversations.stateOf(request('b'))
    expect(conversations.stateOf(request('a'))).toBe(a) // the same conversation, now the most recently used
    expect(a.previousAt).toBe(0)
    conversations.stateOf(request('c')) // b, the least recently used, goes
    expect(conversations.size).toBe(2)
    expect(conversations.stateOf(request('a'))).toBe(a)
    now = PROXY_SESSION_IDLE_MS + 1
    conversations.stateOf(request('d')) // a and c idle too long
    expect(conversations.size).toBe(1)
    expect(conversations.stateOf(request('a'))).not.toBe(a)
  })

  it("keeps anchors in the store in the order they were made, reads them back once, and a forgotten session's are kept no more", async () => {
    const store = memoryStore()
    const conversations = new ProxyConversations({ anchors: store })
    const state = conversations.stateOf(request('s1'))
    state.current = anchor
    conversations.persist(state)
    state.current = { ...anchor, cut: 4 }
    conversations.persist(state)
    // (one write at a time: the second waits for the first, which waits for the store)
    expect(store.saves).toBe(0)
    store.release()
    await Promise.all(conversations.inFlight)
    expect(store.saved.get(state.key)?.current?.cut).toBe(4)
    // another process reads them once
    const next = new ProxyConversations({ anchors: store })
    const read = next.stateOf(request('s1'))
    await next.load(read)
    expect(read.current?.cut).toBe(4)
    // the session deleted: its state forgotten after its writes land, and nothing kept after
    read.current = anchor
    next.persist(read)
    expect(await next.forget('k', 's1')).toBe(1)
    const saves = store.saves
    next.persist(read)
    expect(store.saves).toBe(saves)
  })

  it('names a conversation by tenant, session and first message, else by what the history says', () => {
    expect(conversationKey(request('s1'))).toBe(conversationKey({ ...request('s1'), messages: [user('Fix the parser'), user('Later turn')] }))
    expect(conversationKey(request('s1'))).not.toBe(conversationKey(request('s1', 'A subagent')))
    expect(conversationKey(request('s1'))).not.toBe(conversationKey({ ...request('s1'), keyName: 'other' }))
    const { session: _s, ...unnamed } = request('s1')
    expect(conversationKey(unnamed).startsWith('k\u0000h:')).toBe(true)
  })
})
