/** Head-and-tail clipping of long text, with a marker that says how much was cut. */

export function clipMarker(removedChars: number): string {
  return `\n[… ${removedChars} characters clipped by compaction-gateway …]\n`
}

/**
 * Keeps about `keepChars` characters of `text` (three fifths from the head, the rest from the tail),
 * joined by a marker. Returns the text unchanged when clipping would not make it shorter.
 */
export function clipHeadTail(text: string, keepChars: number): string {
  const keep = Math.max(0, Math.floor(keepChars))
  if (text.length <= keep) return text
  const removed = text.length - keep
  const head = Math.ceil(keep * 0.6)
  const clipped = text.slice(0, head) + clipMarker(removed) + text.slice(text.length - (keep - head))
  return clipped.length < text.length ? clipped : text
}
