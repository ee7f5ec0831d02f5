import { createHash } from 'node:crypto'
import {
  type Clip,
  type Message,
  type SummaryHead,
  assembleHistory,
  assembledHead,
  blocksOf,
  headOf,
  isPromptMessage,
  isTextBlock,
  isToolResult,
  isToolUse,
  unbindThinking
} from '../compaction/index.js'

/**
 * A summary that stands for the first `cut` messages of a client's history. A proxied client keeps
 * sending its whole history; while the first `cut` messages are the same ones (their hash matches),
 * they are replaced by the same summary blocks, so the prompt's prefix stays byte-identical from one
 * request to the next and changes only when a compaction happens.
 */
export interface Anchor {
  /** How many of the client's messages the summary replaces. */
  cut: number
  /** SHA-256 of those messages. */
  prefixHash: string
  /** What the compaction put in front of the kept turns: the summary turn's blocks and the system blocks carried over. */
  head: SummaryHead
  summaryId: string
  /**
   * The kept messages the compaction clipped, as it sent them, with the digest of the client's own: sent the
   * same way while the client sends the same message, so that the prefix changes at compactions only.
   */
  clipped?: ClippedMessage[]
  /**
   * How many messages the client had sent when this summary was first forwarded: the thinking of the kept
   * messages before it was produced on the prefix the summary replaced (compaction/thinking.ts).
   */
  bound?: number
}

export interface ClippedMessage {
  /** Its index in the client's history. */
  index: number
  /** SHA-256 of the client's message as it came. */
  digest: string
  message: Message
  /** The clips made in it (at the client's indices). */
  clips: Clip[]
}

function digestOf(message: Message): string {
  return createHash('sha256').update(JSON.stringify(message)).digest('hex')
}

/**
 * The hash of a history's first `n` messages by their structure: roles, block types, tool call ids and
 * names, and the text of the user's prompts. Tool results and the assistant's texts are left out, so a
 * client that rewrites old tool output in place (pruning) still matches the summary that stands for it;
 * another conversation, or an edited prompt, does not. One message at a time (no megabyte string is built).
 */
export function hashPrefix(messages: readonly Message[], n: number): string {
  const hash = createHash('sha256')
  for (let i = 0; i < n; i++) {
    const m = messages[i] as Message
    hash.update(m.role).update('\u0000')
    const prompt = isPromptMessage(m)
    for (const b of blocksOf(m)) {
      if (b.type === 'thinking' || b.type === 'redacted_thinking') continue
      hash.update(b.type).update('\u0000')
      if (isToolUse(b)) hash.update(String(b.id)).update('\u0000').update(String(b.name))
      else if (isToolResult(b)) hash.update(String(b.tool_use_id))
      else if (prompt && isTextBlock(b)) hash.update(b.text)
      hash.update('\u0001')
    }
    hash.update('\n')
  }
  return hash.digest('hex')
}

/** Whether the anchor still stands for the start of this history. */
export function holds(anchor: Anchor | undefined, messages: readonly Message[]): anchor is Anchor {
  return anchor !== undefined && anchor.cut < messages.length && hashPrefix(messages, anchor.cut) === anchor.prefixHash
}

/**
 * The history with the anchored messages replaced by its summary turn, the client's own messages after it
 * as they came: the input of a new compaction, which clips afresh what it must (and reports it).
 */
export function withAnchor(anchor: Anchor, messages: readonly Message[]): Message[] {
  return assembleHistory(anchor.head, messages.slice(anchor.cut))
}

/**
 * What is forwarded while the anchor stands: withAnchor, with the clips its compaction made repeated where
 * the client sends the same messages, and those clips (at the client's indices) reported. `unbind`: the
 * model checks thinking against its prefix, and the thinking of the kept messages older than the anchor goes.
 */
export function anchoredTail(anchor: Anchor, messages: readonly Message[], unbind = false): { messages: Message[]; clips: Clip[] } {
  let tail = messages.slice(anchor.cut)
  const clips: Clip[] = []
  for (const c of anchor.clipped ?? []) {
    const t = c.index - anchor.cut
    const own = tail[t]
    if (own === undefined || digestOf(own) !== c.digest) continue
    tail[t] = c.message
    clips.push(...c.clips)
  }
  // the kept turns' thinking, stale since the summary took the place of their prefix, taken out
  if (unbind && anchor.bound !== undefined && anchor.bound > anchor.cut) tail = unbindThinking(tail, [{ from: 0, bound: anchor.bound - anchor.cut }]).messages
  return { messages: assembleHistory(anchor.head, tail), clips }
}

/**
 * The kept messages a compaction clipped, read back from what it sent (`sent`: the head in front of the
 * tail from `cut`, merged into its first messages where roles call for it).
 */
function clippedOf(sent: readonly Message[], messages: readonly Message[], cut: number, head: SummaryHead, clips: readonly Clip[]): ClippedMessage[] {
  if (clips.length === 0) return []
  const tail = messages.slice(cut)
  const { messages: headMessages, replaced } = assembledHead(head, tail)
  const out: ClippedMessage[] = []
  for (const index of new Set(clips.map((c) => c.message_index))) {
    const t = index - cut
    const own = tail[t]
    if (own === undefined) continue
    let message = t < replaced ? sent[t] : sent[headMessages.length + t - replaced]
    if (message === undefined) continue
    // a message the head was merged into: its own blocks follow the head's
    if (t < replaced) message = { ...message, content: blocksOf(message).slice(t === 0 ? head.user.length : head.system.length) }
    out.push({ index, digest: digestOf(own), message, clips: clips.filter((c) => c.message_index === index) })
  }
  return out
}

/**
 * Where a forwarded history's own messages begin: `messages` is a summary turn (which may open the first of
 * them) and the client's messages from `keptFrom` on, as sent but for `clips` (at the client's indices).
 * A client in another API's format is given its own items back from these.
 */
export interface ForwardedTail {
  keptFrom: number
  clips: Clip[]
}

/** What an anchor is made of a compaction: where its kept tail begins, what it sent, what it clipped, its summary's id. */
export interface CompactionMade {
  kept_from: number
  messages: Message[]
  clips: Clip[]
  summary: { id: string }
}

/**
 * The anchor a compaction of `input` makes, in terms of the client's history: `input` is the client's
 * `messages`, or them with `base`'s head in front (which may share the first kept messages).
 */
export function anchorOf(response: CompactionMade, messages: readonly Message[], base: Anchor | undefined): Anchor {
  let shift = 0
  if (base) {
    const { messages: head, replaced } = assembledHead(base.head, messages.slice(base.cut))
    shift = head.length - replaced
  }
  const cut = (base?.cut ?? 0) + response.kept_from - shift
  // the same head the compaction put in front of its tail, read back from what it sent
  const head = headOf(response.messages, messages.slice(cut))
  const clips = response.clips.map((clip) => ({ ...clip, message_index: clip.message_index + cut - response.kept_from }))
  const clipped = clippedOf(response.messages, messages, cut, head, clips)
  return { cut, prefixHash: hashPrefix(messages, cut), head, summaryId: response.summary.id, ...(clipped.length > 0 ? { clipped } : {}) }
}
