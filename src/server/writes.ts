/**
 * Store writes begun once an answer has gone (a compaction's record and cold layer, whose indexing takes
 * longer than the compaction the client waits for: docs/performance.md), and the
 * reads that must see them: a read of a session in this process waits until every write of that session
 * reserved before it has settled, so that a client asking for its records right after its answer finds
 * them. Writes are kept apart by session so that a client slow to read its answer delays no one else.
 */
export class WritesAfterAnswers {
  private readonly pending = new Map<string, Set<Promise<void>>>()
  private readonly waiting = new Set<() => void>()

  /**
   * Reserves a write of a tenant's session (none: no read asks for it) and returns what begins it, once
   * however often it is called. `write` must not throw: the record's writer counts and logs its own failures.
   */
  reserve(keyName: string, sessionId: string | undefined, write: () => Promise<void>): () => void {
    const key = sessionKey(keyName, sessionId)
    let begin!: () => void
    const started = new Promise<void>((resolve) => (begin = resolve))
    const done: Promise<void> = started
      .then(write)
      .catch(() => undefined)
      .finally(() => {
        const set = this.pending.get(key)
        set?.delete(done)
        if (set?.size === 0) this.pending.delete(key)
      })
    const set = this.pending.get(key) ?? new Set()
    set.add(done)
    this.pending.set(key, set)
    this.waiting.add(begin)
    return () => {
      if (this.waiting.delete(begin)) begin()
    }
  }

  /** Settles when every write of the session reserved so far has. */
  async settled(keyName: string, sessionId: string): Promise<void> {
    const set = this.pending.get(sessionKey(keyName, sessionId))
    if (set) await Promise.all([...set])
  }

  /** Settles when every write of the tenant's sessions reserved so far has (a list of its sessions). */
  async settledTenant(keyName: string): Promise<void> {
    const prefix = `${keyName}\u0000`
    await Promise.all([...this.pending].filter(([key]) => key.startsWith(prefix)).flatMap(([, set]) => [...set]))
  }

  /** Begins every write still waiting for its answer and settles when all have (before the store closes). */
  async drain(): Promise<void> {
    for (const begin of [...this.waiting]) begin()
    this.waiting.clear()
    await Promise.all([...this.pending.values()].flatMap((set) => [...set]))
  }
}

function sessionKey(keyName: string, sessionId: string | undefined): string {
  return sessionId === undefined ? '' : `${keyName}\u0000${sessionId}`
}
