import { BroadcastChannel } from 'node:worker_threads'
import { LRUCache } from 'lru-cache'
import { type CommonText, fingerprint, lineFingerprints } from '../compaction/index.js'
import { HARNESS_SEED } from './harness-seed.js'

/** How many other conversations must have sent a line for it to count as harness text. */
export const COMMON_IN_OTHERS = 2
/** Most fingerprints remembered (about 100 bytes each); those least recently sent or looked up are forgotten first. */
export const MAX_REMEMBERED_LINES = 200_000

/**
 * What the same key's conversations sent, as fingerprints of their prompts' lines (never the text): a
 * line other conversations sent too is a harness's (its instructions, its reminders), not this user's.
 * A conversation is its session id, or where there is none the fingerprint of its first prompt, so that a
 * resumed conversation is not taken for another one. Held in memory; where it is `shared` by a name, every
 * thread of the process holding a table of that name (the main thread and the compaction workers) learns
 * what any of them learned, so that a history is read the same whichever thread compacts it.
 */
/** What one thread learned, as the others are told it. */
interface Learned {
  keyName: string
  conversation: string
  fingerprints: string[]
}

export class ConversationsText {
  /** Prompts noted and not learned yet (learnLater), learned before anything is looked up. */
  private pending: { keyName: string; conversation: string; prompts: readonly string[] }[] = []
  private scheduled = false

  /**
   * `${tenant}\0${line fingerprint}` → the conversations that sent it (at most COMMON_IN_OTHERS + 1). Least
   * recently used go first, so a harness's lines, sent in every request, stay while one-off lines go.
   */
  private readonly lines: LRUCache<string, string[]>

  /** Where what this table learns goes to the other threads' tables of its name (fingerprints, never text). */
  private channel: BroadcastChannel | undefined

  constructor(
    maxLines = MAX_REMEMBERED_LINES,
    /** Lines known to be harness text before any traffic (HARNESS_SEED: shipped with the service). */
    private readonly seed: ReadonlySet<string> = HARNESS_SEED,
    /** The name the threads' tables of one app share; none: this thread's alone. */
    readonly shared?: string
  ) {
    // bounded by size, one a line, rather than by `max`, which would reserve room for every line at once
    // (four arrays of maxLines, made and held by an app before it has learned anything)
    this.lines = new LRUCache({ maxSize: maxLines, sizeCalculation: () => 1 })
    if (shared !== undefined) {
      this.channel = new BroadcastChannel(shared)
      // it never keeps a process or a worker alive
      this.channel.unref()
      this.channel.onmessage = (event) => {
        const { keyName, conversation, fingerprints } = (event as { data: Learned }).data
        this.note(keyName, conversation, fingerprints)
      }
    }
  }

  /** Stops sharing (the app closes). */
  close(): void {
    // what is still learned here (a compaction answered as the app closed) is this thread's alone
    const channel = this.channel
    this.channel = undefined
    channel?.close()
  }

  /** The conversation a history belongs to. */
  static conversation(sessionId: string | undefined, prompts: readonly string[]): string {
    return sessionId !== undefined ? `s:${sessionId}` : `p:${fingerprint(prompts[0] ?? '')}`
  }

  /** Takes note of the lines a conversation's prompts hold. */
  learn(keyName: string, conversation: string, prompts: readonly string[]): void {
    this.flush()
    this.learnNow(keyName, conversation, prompts)
  }

  /**
   * learn, done once the event loop is free (after the answer that read the history has gone), never
   * later than the next look-up or learning: what is common is the same as with learn, and the
   * fingerprinting of a whole history's prompts is off the compaction's answer.
   */
  learnLater(keyName: string, conversation: string, prompts: readonly string[]): void {
    this.pending.push({ keyName, conversation, prompts })
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => this.flush())
  }

  private flush(): void {
    this.scheduled = false
    if (this.pending.length === 0) return
    const pending = this.pending
    this.pending = []
    for (const { keyName, conversation, prompts } of pending) this.learnNow(keyName, conversation, prompts)
  }

  private learnNow(keyName: string, conversation: string, prompts: readonly string[]): void {
    const fingerprints = prompts.flatMap((prompt) => lineFingerprints(prompt).map((line) => line.fingerprint))
    this.note(keyName, conversation, fingerprints)
    if (fingerprints.length > 0) this.channel?.postMessage({ keyName, conversation, fingerprints } satisfies Learned)
  }

  private note(keyName: string, conversation: string, fingerprints: readonly string[]): void {
    for (const fp of fingerprints) {
      const key = `${keyName}\u0000${fp}`
      const seen = this.lines.get(key)
      if (seen === undefined) this.lines.set(key, [conversation])
      else if (!seen.includes(conversation) && seen.length <= COMMON_IN_OTHERS) seen.push(conversation)
    }
  }

  /** Whether a line was sent by enough of the key's other conversations. */
  common(keyName: string, conversation: string): CommonText {
    this.flush()
    return (fp) => {
      // the harness texts shipped with the service are common from the first request on
      if (this.seed.has(fp)) return true
      const seen = this.lines.get(`${keyName}\u0000${fp}`)
      if (seen === undefined) return false
      const others = seen.includes(conversation) ? seen.length - 1 : seen.length
      return others >= COMMON_IN_OTHERS
    }
  }

  /** Fingerprints remembered now (prompts noted by learnLater and not learned yet are not counted). */
  get size(): number {
    return this.lines.size
  }
}
