import { type Block, type Message, blocksOf } from './types.js'

// A client that compacts by itself: the provider's own compaction (an Anthropic `compaction` block; a Responses
// `compaction` item, which the formats read as a `client_item`) or a request for one (Codex's `compaction_trigger`).

/** Whether the block is the provider's compaction, or a request for one: a client that compacts by itself sends it. */
export function isClientCompaction(block: Block): boolean {
  return block.type === 'compaction' || (block.type === 'client_item' && (block.item_type === 'compaction' || block.item_type === 'compaction_trigger'))
}

/** Whether the client compacts this conversation by itself (its history holds the provider's compaction, or asks for one). */
export function compactsByItself(messages: readonly Message[]): boolean {
  return messages.some((m) => typeof m.content !== 'string' && blocksOf(m).some(isClientCompaction))
}

/** Whether the newest message asks the provider to compact (the request is the client's own compaction: forwarded as sent). */
export function asksProviderCompaction(messages: readonly Message[]): boolean {
  const last = messages[messages.length - 1]
  return last !== undefined && typeof last.content !== 'string' && blocksOf(last).some((b) => b.type === 'client_item' && b.item_type === 'compaction_trigger')
}

/**
 * What the client cannot read, and so no summary may stand for: the provider's own compaction, encrypted
 * reasoning (`redacted_thinking`; a Responses reasoning item with `encrypted_content`, which the formats
 * read as a `client_item` marked `opaque`), and a request that the provider compact.
 */
export function isOpaque(block: Block): boolean {
  return block.type === 'redacted_thinking' || isClientCompaction(block) || (block.type === 'client_item' && block.opaque === true)
}

/** The index of the newest message that holds an opaque block: a cut may fall there at the latest. -1: none. */
export function newestOpaque(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message
    if (typeof m.content !== 'string' && blocksOf(m).some(isOpaque)) return i
  }
  return -1
}
