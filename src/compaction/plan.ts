import { clipHeadTail, clipMarker } from './clip.js'
import { countPrompts, safeBoundaries } from './boundaries.js'
import { CHARS_PER_TOKEN, rawMessageTokens, scaled } from './tokens.js'
import { type Block, type Message, isPromptMessage, isTextBlock, isToolResult } from './types.js'

export interface CutPolicy {
  /** Hard bound on the estimated tokens of the kept tail. */
  keepTokens: number
  /** At most this many prompt messages in the tail. */
  keepTurns: number
  /** The factor the token estimate is calibrated by. */
  scale: number
}

/** One tool_result whose content was clipped so that the newest step fits the tail's bound. */
export interface Clip {
  message_index: number
  block_index: number
  tool_use_id: string
  original_chars: number
  kept_chars: number
}

export interface CutPlan {
  /** Where the tail starts; 0 means there is nothing to summarize. */
  cut: number
  /** The client's messages from `cut` on, clips applied (new objects only where clipped). */
  tail: Message[]
  tailTokens: number
  clips: Clip[]
}

/** Below this many characters a tool result is not clipped further. */
export const MIN_CLIPPED_CHARS = 200

/**
 * Chooses the cut: the longest suffix that starts at a safe boundary, holds at most `keepTurns` prompt
 * messages and at most `keepTokens` tokens. The bound is hard; there is no walk-back past it (seed 001).
 * The newest step is always kept, clipped when it alone is over the bound. In manual mode, or whenever
 * everything would fit, the tail shrinks to the last turn (or step) so that there is something to summarize.
 */
export function planCut(messages: readonly Message[], tokens: readonly number[], policy: CutPolicy): CutPlan {
  const bounds = safeBoundaries(messages)
  const last = bounds[bounds.length - 1] ?? 0
  if (messages.length < 2 || last === 0) return { cut: 0, tail: [...messages], tailTokens: sum(tokens, 0), clips: [] }

  let accepted = last
  let limitedByTurns = false
  let tailTokens = sum(tokens, last)
  let prompts = countPrompts(messages, last)
  for (let k = bounds.length - 2; k >= 0; k--) {
    const b = bounds[k]!
    const next = bounds[k + 1]!
    const more = sum(tokens, b, next)
    const morePrompts = countPrompts(messages, b, next)
    if (tailTokens + more > policy.keepTokens) break
    if (prompts + morePrompts > policy.keepTurns) {
      limitedByTurns = true
      break
    }
    tailTokens += more
    prompts += morePrompts
    accepted = b
  }
  // A turn limit is met at a turn boundary, so the tail does not open with half of a summarized turn.
  if (limitedByTurns && !isPromptMessage(messages[accepted]!)) {
    const opening = bounds.find((b) => b > accepted && isPromptMessage(messages[b]!))
    if (opening !== undefined) accepted = opening
  }
  if (accepted === 0) accepted = shrinkForSpan(messages, bounds)
  if (accepted === 0) return { cut: 0, tail: [...messages], tailTokens: sum(tokens, 0), clips: [] }

  const tail = messages.slice(accepted)
  tailTokens = sum(tokens, accepted)
  if (tailTokens <= policy.keepTokens) return { cut: accepted, tail, tailTokens, clips: [] }
  return clipToFit(messages, accepted, tokens, policy)
}

/** The last turn when it is not the whole history, else the last step. */
function shrinkForSpan(messages: readonly Message[], bounds: readonly number[]): number {
  for (let k = bounds.length - 1; k >= 0; k--) {
    const b = bounds[k]!
    if (b > 0 && isPromptMessage(messages[b]!)) return b
  }
  return bounds[bounds.length - 1] ?? 0
}

function sum(values: readonly number[], from: number, to = values.length): number {
  let n = 0
  for (let i = from; i < to; i++) n += values[i]!
  return n
}

interface Clippable {
  tailIndex: number
  blockIndex: number
  /** Index of the text block inside an array content, or -1 for string content. */
  partIndex: number
  chars: number
}

function clippables(tail: readonly Message[]): Clippable[] {
  const out: Clippable[] = []
  tail.forEach((m, tailIndex) => {
    if (typeof m.content === 'string') return
    m.content.forEach((b, blockIndex) => {
      if (!isToolResult(b)) return
      if (typeof b.content === 'string') out.push({ tailIndex, blockIndex, partIndex: -1, chars: b.content.length })
      else if (Array.isArray(b.content)) {
        b.content.forEach((p, partIndex) => {
          if (isTextBlock(p)) out.push({ tailIndex, blockIndex, partIndex, chars: p.text.length })
        })
      }
    })
  })
  return out
}

/** Clips the largest tool results of the tail, biggest first, until the tail fits its bound. */
function clipToFit(messages: readonly Message[], cut: number, tokens: readonly number[], policy: CutPolicy): CutPlan {
  const tail: Message[] = messages.slice(cut)
  const tailTokensOf = tokens.slice(cut)
  const clips = new Map<string, Clip>()
  let total = sum(tailTokensOf, 0)

  for (let round = 0; round < 1_000 && total > policy.keepTokens; round++) {
    const target = clippables(tail)
      .filter((c) => c.chars > MIN_CLIPPED_CHARS)
      .sort((a, b) => b.chars - a.chars)[0]
    if (!target) break
    const excessChars = Math.ceil(((total - policy.keepTokens) / policy.scale) * CHARS_PER_TOKEN)
    const keepChars = Math.max(MIN_CLIPPED_CHARS, target.chars - excessChars - clipMarker(target.chars).length - 8)
    const message = cloneForClip(tail[target.tailIndex]!, target.blockIndex)
    const block = (message.content as Block[])[target.blockIndex]! as Block & { content: string | Block[]; tool_use_id: string }
    let before: string
    if (target.partIndex < 0) {
      before = block.content as string
      block.content = clipHeadTail(before, keepChars)
    } else {
      const parts = [...(block.content as Block[])]
      const part = parts[target.partIndex] as Block & { text: string }
      before = part.text
      parts[target.partIndex] = { ...part, text: clipHeadTail(before, keepChars) }
      block.content = parts
    }
    tail[target.tailIndex] = message
    const key = `${target.tailIndex}:${target.blockIndex}`
    const prior = clips.get(key)
    const keptChars = textLength(block.content)
    clips.set(key, {
      message_index: cut + target.tailIndex,
      block_index: target.blockIndex,
      tool_use_id: block.tool_use_id,
      original_chars: prior ? prior.original_chars : textLength(originalBlock(messages[cut + target.tailIndex]!, target.blockIndex).content),
      kept_chars: keptChars
    })
    const t = scaled(rawMessageTokens(message), policy.scale)
    total += t - tailTokensOf[target.tailIndex]!
    tailTokensOf[target.tailIndex] = t
  }
  return { cut, tail, tailTokens: total, clips: [...clips.values()].sort((a, b) => a.message_index - b.message_index || a.block_index - b.block_index) }
}

function originalBlock(message: Message, blockIndex: number): Block & { content?: string | Block[] } {
  return (message.content as Block[])[blockIndex] as Block & { content?: string | Block[] }
}

function textLength(content: string | Block[] | undefined): number {
  if (content === undefined) return 0
  if (typeof content === 'string') return content.length
  return content.reduce((n, b) => n + (isTextBlock(b) ? b.text.length : 0), 0)
}

/** A copy of the message with a fresh content array and a fresh copy of the one block to clip. */
function cloneForClip(message: Message, blockIndex: number): Message {
  const content = [...(message.content as Block[])]
  content[blockIndex] = { ...content[blockIndex]! }
  return { ...message, content }
}
