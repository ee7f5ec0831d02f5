import type { Block, Message, SystemPrompt } from './types.js'

/** Characters per token: the estimate both anchors (memcode, opencode) use. */
export const CHARS_PER_TOKEN = 4
/** Flat costs for media, whose size in characters says nothing about their size in tokens. */
export const IMAGE_TOKENS = 1_600
export const DOCUMENT_TOKENS = 3_000
/** Role markers and block framing the provider adds around each message. */
export const MESSAGE_OVERHEAD_TOKENS = 4
/** A client's reported usage may move the estimate by at most this factor either way. */
export const MAX_ESTIMATE_SCALE = 4

/**
 * About the length of JSON.stringify(value), without building the string: a tool input is mostly one
 * long string (a command, a file's content), whose length is known at once. Escapes are not counted.
 * Iterative, so that no nesting can overflow the stack.
 */
export function jsonChars(value: unknown): number {
  if (typeof value !== 'object' || value === null) return scalarChars(value)
  // Only nested objects wait on the stack, made at the first: a tool's input (once a call, 50,000 calls in
  // one step) is mostly an object of strings and needs none.
  let n = 0
  let stack: object[] | undefined
  let v: object | undefined = value
  while (v !== undefined) {
    if (Array.isArray(v)) {
      n += 1 + v.length
      for (const e of v as unknown[]) {
        if (typeof e === 'object' && e !== null) (stack ??= []).push(e)
        else n += scalarChars(e)
      }
    } else {
      n += 1
      for (const key in v) {
        n += key.length + 4
        const e = (v as Record<string, unknown>)[key]
        if (typeof e === 'object' && e !== null) (stack ??= []).push(e)
        else n += scalarChars(e)
      }
    }
    v = stack?.pop()
  }
  return n
}

function scalarChars(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return value.length + 2
    case 'number':
    case 'boolean':
      return String(value).length
    case 'object':
      return 4 // null
    default:
      return 0
  }
}

/** How many characters of text a block stands for (media excluded). */
function blockChars(block: Block): number {
  switch (block.type) {
    case 'text':
      return typeof block.text === 'string' ? block.text.length : 0
    case 'thinking':
      return typeof block.thinking === 'string' ? block.thinking.length : 0
    case 'tool_use':
      return String(block.name ?? '').length + jsonChars(block.input ?? null)
    case 'tool_result': {
      const c = block.content
      if (typeof c === 'string') return c.length
      if (Array.isArray(c)) return (c as Block[]).reduce((n, b) => n + blockChars(b), 0)
      return 0
    }
    case 'image':
    case 'document':
      return 0
    default:
      return jsonChars(block)
  }
}

function blockMediaTokens(block: Block): number {
  if (block.type === 'image') return IMAGE_TOKENS
  if (block.type === 'document') return DOCUMENT_TOKENS
  if (block.type === 'tool_result' && Array.isArray(block.content)) {
    return (block.content as Block[]).reduce((n, b) => n + blockMediaTokens(b), 0)
  }
  return 0
}

/** The unscaled estimate of one message, in tokens (fractional). */
export function rawMessageTokens(message: Message): number {
  if (typeof message.content === 'string') return message.content.length / CHARS_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS
  let chars = 0
  let media = 0
  for (const b of message.content) {
    chars += blockChars(b)
    media += blockMediaTokens(b)
  }
  return chars / CHARS_PER_TOKEN + media + MESSAGE_OVERHEAD_TOKENS
}

export function rawSystemTokens(system: SystemPrompt | undefined, tools: readonly unknown[] | undefined): number {
  let chars = 0
  if (typeof system === 'string') chars += system.length
  else if (Array.isArray(system)) chars += system.reduce((n, b) => n + blockChars(b), 0)
  if (tools) chars += jsonChars(tools)
  return chars / CHARS_PER_TOKEN
}

/**
 * The scale that makes the estimate of the whole prompt match what the provider reported for it,
 * bounded so that a wrong report cannot make the estimate absurd.
 */
export function estimateScale(rawTotal: number, reportedInputTokens: number | undefined): number {
  if (reportedInputTokens === undefined || reportedInputTokens <= 0 || rawTotal <= 0) return 1
  const scale = reportedInputTokens / rawTotal
  return Math.min(MAX_ESTIMATE_SCALE, Math.max(1 / MAX_ESTIMATE_SCALE, scale))
}

export function scaled(raw: number, scale: number): number {
  return Math.ceil(raw * scale)
}

/** Estimated tokens of a text the service writes itself (summary, notes), unscaled by usage. */
export function textTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN)
}

/** Per-message estimates of a history, scaled. */
export function messageTokens(messages: readonly Message[], scale: number): number[] {
  return messages.map((m) => scaled(rawMessageTokens(m), scale))
}

/**
 * The estimate of a whole prompt (system, tools, messages) before any usage is known: the sum the
 * pipeline makes (each message rounded up on its own), so that the proxy and /v1/compact take the same
 * history for the same size and agree at the budget's edge.
 */
export function promptTokens(messages: readonly Message[], system: SystemPrompt | undefined, tools: readonly unknown[] | undefined): number {
  let total = scaled(rawSystemTokens(system, tools), 1)
  for (const m of messages) total += scaled(rawMessageTokens(m), 1)
  return total
}
