import { createHash } from 'node:crypto'
import { type Message, type TextBlock, assembleHistory, summaryBlocks } from '../compaction/index.js'
import type { CompactedResponse } from '../service/compact.js'

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
  /** The summary turn's blocks (the summary and the server's note). */
  blocks: TextBlock[]
  summaryId: string
}

/** The hash of a history's first `n` messages, one message at a time (no megabyte string is built). */
export function hashPrefix(messages: readonly Message[], n: number): string {
  const hash = createHash('sha256')
  for (let i = 0; i < n; i++) hash.update(JSON.stringify(messages[i])).update('\n')
  return hash.digest('hex')
}

/** Whether the anchor still stands for the start of this history. */
export function holds(anchor: Anchor | undefined, messages: readonly Message[]): anchor is Anchor {
  return anchor !== undefined && anchor.cut < messages.length && hashPrefix(messages, anchor.cut) === anchor.prefixHash
}

/** The history with the anchored messages replaced by its summary turn. */
export function withAnchor(anchor: Anchor, messages: readonly Message[]): Message[] {
  return assembleHistory(anchor.blocks, messages.slice(anchor.cut))
}

/**
 * The anchor a compaction of `input` makes, in terms of the client's history: `input` is the client's
 * `messages`, or them with `base`'s summary turn in front (which shares a message with the first kept one
 * when that one is a user message).
 */
export function anchorOf(response: CompactedResponse, messages: readonly Message[], base: Anchor | undefined): Anchor {
  const shift = base && messages[base.cut]?.role !== 'user' ? 1 : 0
  const cut = (base?.cut ?? 0) + response.kept_from - shift
  return {
    cut,
    prefixHash: hashPrefix(messages, cut),
    // the same blocks the compaction put in front of its tail (no recall hint, no recall tool in a proxy)
    blocks: summaryBlocks(response.summary.text, undefined, false),
    summaryId: response.summary.id
  }
}
