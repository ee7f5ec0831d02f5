import { CHARS_PER_TOKEN, type RenderedMessage, clipHeadTail, textTokens } from '../compaction/index.js'

/**
 * Splits a rendered span at message boundaries into chunks of at most `budget` tokens each. A single
 * message larger than the budget is clipped (head and tail) to fit, so no call's input ever exceeds it.
 */
export function chunkParts(parts: readonly RenderedMessage[], budget: number): RenderedMessage[][] {
  const maxChars = Math.max(400, budget * CHARS_PER_TOKEN)
  const chunks: RenderedMessage[][] = []
  let current: RenderedMessage[] = []
  let size = 0
  for (const part of parts) {
    const fitted = part.text.length > maxChars ? { ...part, text: clipHeadTail(part.text, maxChars - 200) } : part
    const tokens = textTokens(fitted.text) + 2
    if (current.length > 0 && size + tokens > budget) {
      chunks.push(current)
      current = []
      size = 0
    }
    current.push(fitted)
    size += tokens
  }
  if (current.length > 0) chunks.push(current)
  return chunks
}
