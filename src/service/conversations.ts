import { LRUCache } from 'lru-cache'
import { type CommonText, fingerprint, lineFingerprints } from '../compaction/index.js'

/** How many other conversations must have sent a line for it to count as harness text. */
export const COMMON_IN_OTHERS = 2
/** Most fingerprints remembered (about 100 bytes each); those least recently sent or looked up are forgotten first. */
export const MAX_REMEMBERED_LINES = 200_000

/**
 * What the same key's conversations sent, as fingerprints of their prompts' lines (never the text): a
 * line other conversations sent too is a harness's (its instructions, its reminders), not this user's.
 * A conversation is its session id, or where there is none the fingerprint of its first prompt, so that a
 * resumed conversation is not taken for another one. Held in memory by each process and worker thread,
 * which learn from the compactions they run.
 */
export class ConversationsText {
  /**
   * `${tenant}\0${line fingerprint}` → the conversations that sent it (at most COMMON_IN_OTHERS + 1). Least
   * recently used go first, so a harness's lines, sent in every request, stay while one-off lines go.
   */
  private readonly lines: LRUCache<string, string[]>

  constructor(maxLines = MAX_REMEMBERED_LINES) {
    this.lines = new LRUCache({ max: maxLines })
  }

  /** The conversation a history belongs to. */
  static conversation(sessionId: string | undefined, prompts: readonly string[]): string {
    return sessionId !== undefined ? `s:${sessionId}` : `p:${fingerprint(prompts[0] ?? '')}`
  }

  /** Takes note of the lines a conversation's prompts hold. */
  learn(tenant: string, conversation: string, prompts: readonly string[]): void {
    for (const prompt of prompts) {
      for (const { fingerprint: fp } of lineFingerprints(prompt)) {
        const key = `${tenant}\u0000${fp}`
        const seen = this.lines.get(key)
        if (seen === undefined) this.lines.set(key, [conversation])
        else if (!seen.includes(conversation) && seen.length <= COMMON_IN_OTHERS) seen.push(conversation)
      }
    }
  }

  /** Whether a line was sent by enough of the key's other conversations. */
  common(tenant: string, conversation: string): CommonText {
    return (fp) => {
      const seen = this.lines.get(`${tenant}\u0000${fp}`)
      if (seen === undefined) return false
      const others = seen.includes(conversation) ? seen.length - 1 : seen.length
      return others >= COMMON_IN_OTHERS
    }
  }

  get size(): number {
    return this.lines.size
  }
}
