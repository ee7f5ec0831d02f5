/** Head-and-tail clipping of long text, with a marker that says how much was cut. */

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff

/**
 * `text.slice(0, end)`, ending one code unit sooner where `end` would split a surrogate pair: what the
 * service cuts never holds half an emoji (the Messages API refuses a lone surrogate). A lone surrogate the
 * client sent stays as it was.
 */
export function sliceHead(text: string, end: number): string {
  let at = Math.max(0, Math.min(text.length, end))
  if (at > 0 && at < text.length && isHigh(text.charCodeAt(at - 1)) && isLow(text.charCodeAt(at))) at--
  return text.slice(0, at)
}

/** `text.slice(start)`, beginning one code unit later where `start` would split a surrogate pair. */
export function sliceTail(text: string, start: number): string {
  let at = Math.max(0, Math.min(text.length, start))
  if (at > 0 && at < text.length && isLow(text.charCodeAt(at)) && isHigh(text.charCodeAt(at - 1))) at++
  return text.slice(at)
}

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
  const head = Math.ceil(keep * 0.6)
  const kept = sliceHead(text, head)
  const end = sliceTail(text, text.length - (keep - head))
  const clipped = kept + clipMarker(text.length - kept.length - end.length) + end
  return clipped.length < text.length ? clipped : text
}
