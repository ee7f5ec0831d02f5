import type { DeletedSession, Store } from '../storage/store.js'

/** What deleting a session reaches: the store (whose deletion waits for the writes of answers already given), the proxy's memory, Redis's locks. */
export interface SessionDeletionDeps {
  store: Pick<Store, 'deleteSession'>
  /** The proxy's conversations of the session held in this process; resolves once their writes in flight have landed. */
  forgetConversations?: (keyName: string, sessionId: string) => Promise<number>
  /** Deletes the summaries' locks in Redis; a failure is told, not thrown (they hold no text and expire). */
  dropLocks?: (cacheKeys: readonly string[]) => Promise<void>
  onLockFault?: (err: unknown) => void
}

/**
 * Deletes a tenant's session: first what would write it again (the proxy's conversations, the writes of
 * answers already given), then the store's rows, then Redis's locks of its summaries. Idempotent.
 */
export async function deleteSession(deps: SessionDeletionDeps, keyName: string, sessionId: string): Promise<DeletedSession & { conversations: number }> {
  const conversations = (await deps.forgetConversations?.(keyName, sessionId)) ?? 0
  const deleted = await deps.store.deleteSession(sessionId, keyName)
  if (deleted.cache_keys.length > 0 && deps.dropLocks) await deps.dropLocks(deleted.cache_keys).catch((err: unknown) => deps.onLockFault?.(err))
  return { ...deleted, conversations }
}
