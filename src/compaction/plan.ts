import { clipHeadTail, clipMarker } from './clip.js'
import { countPrompts, safeBoundaries } from './boundaries.js'
import { CHARS_PER_TOKEN, rawMessageTokens, scaled } from './tokens.js'
import { type Block, type Message, isPromptMessage, isTextBlock, isToolResult, isToolUse } from './types.js'
import { at } from './at.js'

export interface CutPolicy {
  /** Hard bound on the estimated tokens of the kept tail (where `clipTokens` is set: where the cut is aimed). */
  keepTokens: number
  /**
   * Where set (at least keepTokens): the hard bound instead, to which the newest step is clipped only when it
   * alone is over it; older steps are kept only within keepTokens.
   */
  clipTokens?: number
  /** The latest a cut may fall (where the newest block the client cannot read is: it is kept, never summarized). */
  maxCut?: number
  /** At most this many prompt messages in the tail. */
  keepTurns: number
  /** The factor the token estimate is calibrated by. */
  scale: number
}

export type ClipKind = 'prompt' | 'text' | 'thinking' | 'tool_input' | 'tool_result'

/** One text of the tail clipped (head and tail kept, a marker between) so that the tail fits its bound. */
export interface Clip {
  kind: ClipKind
  message_index: number
  /** The block's index in the message's content; absent when the message's content is one string. */
  block_index?: number
  /** JSON pointer, in the request body, to the string that was clipped. */
  path: string
  /** The call the clipped tool input or tool result belongs to. */
  tool_use_id?: string
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
  /** Set when even every text of the newest step clipped to a marker leaves the tail over its bound. */
  overBound?: boolean
  /** Set when the cut was moved back to keep the newest block the client cannot read (maxCut). */
  heldBack?: boolean
}

/** Below this many characters a text is not clipped on the first pass; the second pass keeps only the marker. */
export const MIN_CLIPPED_CHARS = 200

/**
 * Chooses the cut: the longest suffix that starts at a safe boundary, holds at most `keepTurns` prompt
 * messages and at most `keepTokens` tokens. The bound is hard; there is no walk-back past it.
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
    const b = at(bounds, k)
    const next = at(bounds, k + 1)
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
  if (limitedByTurns && !isPromptMessage(at(messages, accepted))) {
    const opening = bounds.find((b) => b > accepted && isPromptMessage(at(messages, b)))
    if (opening !== undefined) accepted = opening
  }
  if (accepted === 0) accepted = shrinkForSpan(messages, bounds)
  let heldBack = false
  if (policy.maxCut !== undefined && accepted > policy.maxCut) {
    // the newest opaque block and everything after it are kept: the cut moves back to a boundary before it
    const maxCut = policy.maxCut
    accepted = [...bounds].reverse().find((b) => b <= maxCut) ?? 0
    heldBack = true
  }
  if (accepted === 0) return { cut: 0, tail: [...messages], tailTokens: sum(tokens, 0), clips: [], ...(heldBack ? { heldBack } : {}) }

  const tail = messages.slice(accepted)
  tailTokens = sum(tokens, accepted)
  const bound = Math.max(policy.keepTokens, policy.clipTokens ?? 0)
  if (tailTokens <= bound) return { cut: accepted, tail, tailTokens, clips: [], ...(heldBack ? { heldBack } : {}) }
  return { ...clipToFit(messages, accepted, tokens, bound, policy.scale), ...(heldBack ? { heldBack } : {}) }
}

/** The last turn when it is not the whole history, else the last step. */
function shrinkForSpan(messages: readonly Message[], bounds: readonly number[]): number {
  for (let k = bounds.length - 1; k >= 0; k--) {
    const b = at(bounds, k)
    if (b > 0 && isPromptMessage(at(messages, b))) return b
  }
  return bounds[bounds.length - 1] ?? 0
}

function sum(values: readonly number[], from: number, to = values.length): number {
  let n = 0
  for (let i = from; i < to; i++) n += at(values, i)
  return n
}

/** One string of the tail that may be clipped: where it is, what it is, how long. */
interface Clippable {
  kind: ClipKind
  tailIndex: number
  /** -1 when the message's content is one string. */
  blockIndex: number
  /** Keys from the block (or, for string content, from the message) down to the string. */
  keys: (string | number)[]
  chars: number
  toolUseId?: string
}

/** Below this many characters a string of a tool input is left alone: clipping would not make it shorter. */
const MIN_INPUT_STRING = 100

/** The strings of a tool input long enough to clip, found without recursion. */
function inputStrings(input: unknown): { keys: (string | number)[]; chars: number }[] {
  const found: { keys: (string | number)[]; chars: number }[] = []
  const stack: { value: unknown; keys: (string | number)[] }[] = [{ value: input, keys: [] }]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const { value, keys } = top
    if (typeof value === 'string') {
      if (value.length > MIN_INPUT_STRING) found.push({ keys, chars: value.length })
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, keys: [...keys, i] }))
    } else if (typeof value === 'object' && value !== null) {
      for (const key in value) stack.push({ value: (value as Record<string, unknown>)[key], keys: [...keys, key] })
    }
  }
  return found
}

/** Every text of the tail that clipping could shorten: prompts, assistant text, thinking, tool inputs and results. */
function clippables(tail: readonly Message[]): Clippable[] {
  const out: Clippable[] = []
  tail.forEach((m, tailIndex) => {
    const textKind: ClipKind = m.role === 'user' ? 'prompt' : 'text'
    if (typeof m.content === 'string') {
      out.push({ kind: textKind, tailIndex, blockIndex: -1, keys: ['content'], chars: m.content.length })
      return
    }
    m.content.forEach((b, blockIndex) => {
      if (isTextBlock(b)) out.push({ kind: textKind, tailIndex, blockIndex, keys: ['text'], chars: b.text.length })
      else if (b.type === 'thinking' && typeof b.thinking === 'string')
        out.push({ kind: 'thinking', tailIndex, blockIndex, keys: ['thinking'], chars: b.thinking.length })
      else if (isToolUse(b)) {
        for (const leaf of inputStrings(b.input))
          out.push({ kind: 'tool_input', tailIndex, blockIndex, keys: ['input', ...leaf.keys], chars: leaf.chars, toolUseId: b.id })
      } else if (isToolResult(b)) {
        if (typeof b.content === 'string')
          out.push({ kind: 'tool_result', tailIndex, blockIndex, keys: ['content'], chars: b.content.length, toolUseId: b.tool_use_id })
        else if (Array.isArray(b.content)) {
          b.content.forEach((p, partIndex) => {
            if (isTextBlock(p))
              out.push({ kind: 'tool_result', tailIndex, blockIndex, keys: ['content', partIndex, 'text'], chars: p.text.length, toolUseId: b.tool_use_id })
          })
        }
      }
    })
  })
  return out
}

/** Reads the string a clippable names. */
function readAt(message: Message, c: Clippable): string {
  let node: unknown = c.blockIndex < 0 ? message : (message.content as Block[])[c.blockIndex]
  for (const key of c.keys) node = (node as Record<string | number, unknown>)[key]
  return node as string
}

/**
 * A copy of the message with the named string replaced; every container on the way down is copied,
 * so the client's own objects are never changed.
 */
function writeAt(message: Message, c: Clippable, text: string): Message {
  const copy = (node: unknown, keys: readonly (string | number)[]): unknown => {
    if (keys.length === 0) return text
    const [key, ...rest] = keys as [string | number, ...(string | number)[]]
    const container = node as Record<string | number, unknown>
    const clone = (Array.isArray(node) ? [...(node as unknown[])] : { ...container }) as Record<string | number, unknown>
    clone[key] = copy(container[key], rest)
    return clone
  }
  if (c.blockIndex < 0) return copy(message, c.keys) as Message
  return copy(message, ['content', c.blockIndex, ...c.keys]) as Message
}

function pointerOf(messageIndex: number, c: Clippable): string {
  const keys = c.blockIndex < 0 ? c.keys : ['content', c.blockIndex, ...c.keys]
  return `/messages/${messageIndex}/${keys.map((k) => String(k).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`
}

/**
 * Clips the tail's largest texts, biggest first, until the tail fits its bound: a first pass keeps at
 * least MIN_CLIPPED_CHARS of each, a second keeps only the marker. Each text is clipped once per pass,
 * so the work is O(n log n) in the texts of the tail.
 */
export function clipToFit(messages: readonly Message[], cut: number, tokens: readonly number[], bound: number, scale: number): CutPlan {
  const policy = { keepTokens: bound, scale }
  const tail: Message[] = messages.slice(cut)
  const tailTokensOf = tokens.slice(cut)
  const clips = new Map<string, Clip>()
  let total = sum(tailTokensOf, 0)
  const candidates = clippables(tail).sort((a, b) => b.chars - a.chars)

  for (const floor of [MIN_CLIPPED_CHARS, 0]) {
    for (const target of candidates) {
      if (total <= policy.keepTokens) break
      const before = readAt(at(tail, target.tailIndex), target)
      if (before.length <= floor) continue
      const excessChars = Math.ceil(((total - policy.keepTokens) / policy.scale) * CHARS_PER_TOKEN)
      const keepChars = Math.max(floor, before.length - excessChars - clipMarker(before.length).length - 8)
      const after = clipHeadTail(before, keepChars)
      if (after.length >= before.length) continue
      const message = writeAt(at(tail, target.tailIndex), target, after)
      tail[target.tailIndex] = message
      const messageIndex = cut + target.tailIndex
      const path = pointerOf(messageIndex, target)
      const prior = clips.get(path)
      clips.set(path, {
        kind: target.kind,
        message_index: messageIndex,
        ...(target.blockIndex >= 0 ? { block_index: target.blockIndex } : {}),
        path,
        ...(target.toolUseId !== undefined ? { tool_use_id: target.toolUseId } : {}),
        original_chars: prior ? prior.original_chars : before.length,
        kept_chars: after.length
      })
      const t = scaled(rawMessageTokens(message), policy.scale)
      total += t - at(tailTokensOf, target.tailIndex)
      tailTokensOf[target.tailIndex] = t
    }
  }
  const ordered = [...clips.values()].sort(
    (a, b) => a.message_index - b.message_index || (a.block_index ?? -1) - (b.block_index ?? -1) || (a.path < b.path ? -1 : 1)
  )
  return { cut, tail, tailTokens: total, clips: ordered, ...(total > policy.keepTokens ? { overBound: true } : {}) }
}
