/**
 * A client's history in another API's format, as the core reads it, and the way back: the items are
 * grouped into turns (the user's side: prompts, tool outputs; the assistant's side: its text, calls and
 * reasoning), each turn one core message whose blocks remember the item and field they came from. The
 * core cuts between turns, so an item is never split from the items of its turn, nor a call from its
 * output; what comes back is the client's own items, untouched but for the clips the core reports.
 */
import type { Block, Clip, HistoryProblem, Message } from '../compaction/index.js'

/** Where a core block came from: the client's item, and the field (with its index) that holds its text. */
export interface Source {
  item: number
  /** The JSON pointer, below the item, of the string the block's text is (for a clip), when it is one. */
  field?: string
  /** The index of the content part it is, where the item's content is a list of parts. */
  part?: number
  /**
   * How a clipped block is written back: its text (the default), its input as JSON text, its input's one
   * string, or (a tool result whose output is a list of parts) each clipped text part at its own place.
   */
  as?: 'text' | 'json' | 'input' | 'parts'
}

/** One item as the core sees it: which side of the conversation it is on, and its blocks. */
export interface ItemBlocks {
  /** `either`: an item of no side (an unknown type), in the turn it stands in (the user's, at the start). */
  side: 'user' | 'assistant' | 'either'
  blocks: { block: Block; source: Source }[]
}

/** The rules of one format: how its items read, how the pairs of calls and outputs are told, how a summary is written. */
export interface FormatRules {
  /** Whether an item at the head of the history is part of the system prompt (counted, returned as sent). */
  isSystem(item: Record<string, unknown>): boolean
  /** The system prompt's text of such an item. */
  systemText(item: Record<string, unknown>): string
  /** The item's blocks, or the first thing wrong with it (`all`: the whole history, for what an item's reading depends on). */
  read(item: Record<string, unknown>, index: number, all: readonly Record<string, unknown>[]): ItemBlocks | HistoryProblem
  /** The calls an item makes that an output must answer (their ids), and the call it answers. */
  calls(item: Record<string, unknown>, all: readonly Record<string, unknown>[]): string[]
  answers(item: Record<string, unknown>): string | readonly string[] | undefined
  /** The item that carries the summary turn's texts (a user message). */
  summaryItem(texts: string[]): Record<string, unknown>
  /** The items' place in the request body ("messages"). */
  field: string
  /** Each item is a whole turn (Gemini's contents): an item of the assistant's after one with open calls is out of order. */
  wholeTurns?: boolean
}

/** A client history as the core reads it, with what is needed to give the compacted one back in the client's format. */
export interface Adapted {
  /** The history's head items that are its system prompt, and their text (counted only). */
  leading: number
  systemText: string
  /** The core's messages: one per turn. */
  messages: Message[]
  /** The client item each core message starts at. */
  starts: number[]
  /** Per core message, per block: where it came from. */
  sources: Source[][]
}

/** A content part's text, for the system prompt and the core's text blocks. */
export function partText(part: unknown): string | undefined {
  const p = part as { type?: unknown; text?: unknown; refusal?: unknown }
  if ((p.type === 'text' || p.type === 'input_text' || p.type === 'output_text') && typeof p.text === 'string') return p.text
  if (p.type === 'refusal' && typeof p.refusal === 'string') return p.refusal
  return undefined
}

/** An item's content as text blocks (a part that is no text kept as an opaque block), each knowing its place. */
export function contentBlocks(
  content: unknown,
  index: number,
  problem: (rest: string, message: string) => ReturnType<typeof problemAt>
): { block: Block; source: Source }[] | ReturnType<typeof problemAt> {
  if (content === undefined || content === null) return []
  if (typeof content === 'string') return content === '' ? [] : [{ block: { type: 'text', text: content }, source: { item: index, field: '/content' } }]
  if (!Array.isArray(content)) return problem('/content', 'content must be a string, a list of parts, or null')
  const out: { block: Block; source: Source }[] = []
  content.forEach((part, p) => {
    const text = partText(part)
    if (text !== undefined) {
      if (text !== '')
        out.push({
          block: { type: 'text', text },
          source: { item: index, part: p, field: `/content/${p}/${(part as { type: string }).type === 'refusal' ? 'refusal' : 'text'}` }
        })
    } else out.push({ block: { type: 'client_part', part }, source: { item: index, part: p } })
  })
  return out
}

/** A message's content as text: a string, or its text parts joined (for a system prompt, counted only). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  return Array.isArray(content)
    ? content
        .map(partText)
        .filter((t): t is string => t !== undefined)
        .join('\n')
    : ''
}

export function problemAt(field: string, item: number, rest: string, message: string, kind: HistoryProblem['kind'] = 'history'): HistoryProblem {
  return { kind, path: `/${field}/${item}${rest}`, message: `${field}[${item}]${rest.replaceAll('/', '.')}: ${message}` }
}

function isItem(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Reads a history under a format's rules: its turns as core messages, or the first problem, at its place. */
export function adaptHistory(items: readonly Record<string, unknown>[], rules: FormatRules): Adapted | HistoryProblem {
  let leading = 0
  while (leading < items.length && isItem(items[leading]) && rules.isSystem(items[leading] as Record<string, unknown>)) leading++
  const systemText = items
    .slice(0, leading)
    .map((i) => rules.systemText(i))
    .join('\n\n')
  if (leading === items.length) return problemAt(rules.field, leading, '', 'a history needs at least one message after its system messages', 'shape')

  const messages: Message[] = []
  const starts: number[] = []
  const sources: Source[][] = []
  let pending = new Map<string, number>() // the open calls of the last assistant turn: id -> the item that made it
  for (let i = leading; i < items.length; i++) {
    const item = items[i] as Record<string, unknown>
    const read = rules.read(item, i, items)
    if ('kind' in read) return read
    const given = rules.answers(item)
    const answering = given === undefined ? [] : typeof given === 'string' ? [given] : given
    for (const answered of answering) {
      if (!pending.has(answered))
        return problemAt(rules.field, i, '', `answers call "${answered}", which no earlier call of the assistant's last turn made (or another output answered)`)
      pending.delete(answered)
    }
    const answered = answering.length > 0 ? answering[0] : undefined
    const last = messages.at(-1)
    const side = read.side === 'either' ? ((last?.role as 'user' | 'assistant' | undefined) ?? 'user') : read.side
    // the outputs of a turn's calls come right after it, before any other message (both APIs require it)
    const unanswered =
      pending.size > 0 &&
      (side === 'assistant' ? rules.wholeTurns === true || !last || last.role !== 'assistant' : read.side === 'user' && answered === undefined)
    if (unanswered) {
      const [id, at] = pending.entries().next().value as [string, number]
      return problemAt(rules.field, at, '', `call "${id}" has no output before ${rules.field}[${i}], which is not one`)
    }
    if (!last || last.role !== side) {
      if (!last && side !== 'user')
        return problemAt(
          rules.field,
          i,
          '',
          "the first message after the system messages must be the user's: the gateway cuts conversations that open with the user"
        )
      if (side === 'assistant') pending = new Map()
      messages.push({ role: side, content: [] })
      starts.push(i)
      sources.push([])
    }
    const message = messages.at(-1) as Message
    const blocks = message.content as Block[]
    const from = sources.at(-1) as Source[]
    for (const { block, source } of read.blocks) {
      blocks.push(block)
      from.push(source)
    }
    for (const id of rules.calls(item, items)) {
      if (pending.has(id)) return problemAt(rules.field, i, '', `call id "${id}" is used twice in one turn`)
      pending.set(id, i)
    }
  }
  return { leading, systemText, messages, starts, sources }
}

/** The compacted history in the client's format, and the figures that name its items. */
export interface Given {
  items: unknown[]
  kept_from: number
  clips: Clip[]
  compacted_messages: number
  kept_messages: number
}

/** A block's string after the core clipped it, as its source holds it. */
function clippedText(block: Block, as: Source['as']): string | undefined {
  if (as === 'json') return JSON.stringify(block.input)
  if (as === 'input') return String((block.input as { input?: unknown } | undefined)?.input ?? '')
  if (typeof block.text === 'string') return block.text
  if (typeof block.content === 'string') return block.content
  if (Array.isArray(block.content)) return (block.content as Block[]).map((b) => (typeof b.text === 'string' ? b.text : '')).join('\n')
  return undefined
}

/**
 * Where a clipped block's text goes back in its item, and the text: the block's field, or, for a tool
 * result given as a list of parts, the one text part the clip names (its other parts, images among them, as they came).
 */
function clippedPlace(block: Block, source: Source, clipPath: string): { field: string; text: string } | undefined {
  if (source.field === undefined) return undefined
  if (source.as === 'parts') {
    const part = /\/content\/\d+\/content\/(\d+)\/text$/.exec(clipPath)?.[1]
    const text = part === undefined ? undefined : (block.content as Block[] | undefined)?.[Number(part)]?.text
    return typeof text === 'string' ? { field: `${source.field}/${part}/text`, text } : undefined
  }
  const text = clippedText(block, source.as)
  return text === undefined ? undefined : { field: source.field, text }
}

/** Sets the string at `pointer` (below an item) in a copy of the item. */
function setAt(item: Record<string, unknown>, pointer: string, value: string): void {
  const keys = pointer.split('/').slice(1)
  let node = item as Record<string, unknown>
  for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>
  node[keys.at(-1) as string] = value
}

/** Whether a core block's text can be set back in its client item (a placeholder in place of a tool output, say). */
export function settable(adapted: Adapted, message: number, block: number): boolean {
  const source = adapted.sources[message]?.[block]
  return source?.field !== undefined && source.as !== 'parts'
}

/**
 * The client's items with the core's cleared tool results set back in them (each a placeholder string at
 * its output's place; `messages`: the core's history with them cleared), every other item as it came.
 */
export function withCleared(
  items: readonly Record<string, unknown>[],
  adapted: Adapted,
  messages: readonly Message[],
  uses: readonly { message: number; block: number }[]
): Record<string, unknown>[] {
  const out = [...items]
  const copied = new Set<number>()
  for (const use of uses) {
    const source = adapted.sources[use.message]?.[use.block]
    const block = (messages[use.message]?.content as Block[] | undefined)?.[use.block]
    if (!source || !block || !settable(adapted, use.message, use.block)) continue
    const place = clippedPlace(block, source, '')
    if (!place) continue
    if (!copied.has(source.item)) {
      out[source.item] = structuredClone(items[source.item]) as Record<string, unknown>
      copied.add(source.item)
    }
    setAt(out[source.item] as Record<string, unknown>, place.field, place.text)
  }
  return out
}

/**
 * The compacted history given back in the client's format: its system items as sent, the summary turn as
 * one user item, and its own items from the first kept turn on, each as sent but for the strings the
 * core clipped (set from the core's tail, and the clips' places told in the client's items).
 */
export function givenBack(
  items: readonly Record<string, unknown>[],
  adapted: Adapted,
  rules: FormatRules,
  compacted: { messages: readonly Message[]; kept_from: number; clips: readonly Clip[] }
): Given {
  const keptFrom = adapted.starts[compacted.kept_from] ?? items.length
  const tail = adapted.messages.slice(compacted.kept_from)
  // The core puts the summary turn before the tail's first message, or into it where that is the user's.
  const first = compacted.messages[0]
  const opensWithUser = tail[0]?.role === 'user'
  const firstBlocks = first ? (first.content as Block[]) : []
  const headBlocks = opensWithUser ? firstBlocks.slice(0, firstBlocks.length - (tail[0]?.content as Block[]).length) : firstBlocks
  const tailOut = opensWithUser
    ? [{ ...first, content: firstBlocks.slice(headBlocks.length) } as Message, ...compacted.messages.slice(1)]
    : compacted.messages.slice(1)

  const copies = new Map<number, Record<string, unknown>>()
  const clips: Clip[] = []
  for (const clip of compacted.clips) {
    const t = clip.message_index - compacted.kept_from
    const j = clip.block_index ?? 0
    const source = adapted.sources[clip.message_index]?.[j]
    const block = (tailOut[t]?.content as Block[] | undefined)?.[j]
    const place = block && source ? clippedPlace(block, source, clip.path) : undefined
    if (!source || place === undefined) continue
    const copy = copies.get(source.item) ?? (structuredClone(items[source.item]) as Record<string, unknown>)
    copies.set(source.item, copy)
    setAt(copy, place.field, place.text)
    const { block_index: _block, ...rest } = clip
    clips.push({
      ...rest,
      message_index: source.item,
      ...(source.part !== undefined ? { block_index: source.part } : {}),
      path: `/${rules.field}/${source.item}${place.field}`
    })
  }
  const texts = headBlocks.map((b) => (typeof b.text === 'string' ? b.text : '')).filter((t) => t !== '')
  const kept = items.slice(keptFrom).map((item, k) => copies.get(keptFrom + k) ?? item)
  return {
    items: [...items.slice(0, adapted.leading), rules.summaryItem(texts), ...kept],
    kept_from: keptFrom,
    clips,
    compacted_messages: keptFrom - adapted.leading,
    kept_messages: items.length - keptFrom
  }
}
