import { type Message, isToolResult, isToolUse } from './types.js'
import { at } from './at.js'

/** A place in the request and what is wrong there. `path` is a JSON pointer into the request body. */
export interface HistoryProblem {
  /** `shape`: a block lacks a field its type requires (400); `history`: the rules of a conversation (422). */
  kind: 'shape' | 'history'
  path: string
  message: string
}

export function pointer(messageIndex: number, blockIndex?: number): string {
  return blockIndex === undefined ? `/messages/${messageIndex}` : `/messages/${messageIndex}/content/${blockIndex}`
}

export function place(messageIndex: number, blockIndex?: number): string {
  return blockIndex === undefined ? `messages[${messageIndex}]` : `messages[${messageIndex}].content[${blockIndex}]`
}

function problem(kind: HistoryProblem['kind'], i: number, j: number | undefined, text: string): HistoryProblem {
  return { kind, path: pointer(i, j), message: `${place(i, j)}: ${text}` }
}

/** The block types whose fields are checked; any other type passes untouched (the API may add more). */
export const KNOWN_BLOCK_TYPES = ['text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'] as const

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function blockWithoutType(i: number, j: number, at: string, value: unknown): HistoryProblem {
  const what = isObject(value) ? 'has no string `type`' : `is ${value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`}, not a block`
  return {
    kind: 'shape',
    path: `${pointer(i, j)}${at}`,
    message: `${place(i, j)}${at.replace(/\/content\/(\d+)/, '.content[$1]')} ${what}: a block is an object whose \`type\` is one of ${KNOWN_BLOCK_TYPES.join(', ')} (or a newer type)`
  }
}

/** The fields a block of a known type must have; tool_result content parts are checked one level down. */
export function shapeProblem(block: unknown, i: number, j: number): HistoryProblem | undefined {
  if (!isObject(block) || typeof block.type !== 'string' || block.type === '') return blockWithoutType(i, j, '', block)
  const fault = (text: string): HistoryProblem => problem('shape', i, j, text)
  switch (block.type) {
    case 'text':
      return typeof block.text === 'string' ? undefined : fault('a text block needs a string `text`')
    case 'thinking':
      return typeof block.thinking === 'string' ? undefined : fault('a thinking block needs a string `thinking`')
    case 'redacted_thinking':
      return typeof block.data === 'string' ? undefined : fault('a redacted_thinking block needs a string `data`')
    case 'image':
    case 'document':
      return isObject(block.source) ? undefined : fault(`an ${block.type === 'image' ? 'image' : 'document'} block needs a \`source\` object`)
    case 'tool_use':
      if (typeof block.id !== 'string' || block.id === '') return fault('a tool_use block needs a string `id`')
      if (typeof block.name !== 'string') return fault('a tool_use block needs a string `name`')
      return isObject(block.input) ? undefined : fault('a tool_use block needs an `input` object')
    case 'tool_result':
      return resultProblem(block, i, j)
    default:
      return undefined
  }
}

function resultProblem(block: Record<string, unknown>, i: number, j: number): HistoryProblem | undefined {
  if (typeof block.tool_use_id !== 'string') return problem('shape', i, j, 'a tool_result block needs a string `tool_use_id`')
  if (block.is_error !== undefined && typeof block.is_error !== 'boolean') return problem('shape', i, j, 'a tool_result `is_error` is true or false')
  const c = block.content
  if (c === undefined || typeof c === 'string') return undefined
  if (!Array.isArray(c)) return problem('shape', i, j, 'a tool_result `content` is a string or an array of blocks')
  for (let k = 0; k < c.length; k++) {
    const part: unknown = c[k]
    const at = `/content/${k}`
    if (!isObject(part) || typeof part.type !== 'string' || part.type === '') return blockWithoutType(i, j, at, part)
    const where = { kind: 'shape' as const, path: `${pointer(i, j)}${at}` }
    const name = `${place(i, j)}.content[${k}]`
    if (part.type === 'tool_result' || part.type === 'tool_use') {
      return { ...where, message: `${name}: a tool_result's content holds content blocks (text, image, document…), not a ${part.type}` }
    }
    if (part.type === 'text' && typeof part.text !== 'string') return { ...where, message: `${name}: a text block needs a string \`text\`` }
    if ((part.type === 'image' || part.type === 'document') && !isObject(part.source)) {
      return { ...where, message: `${name}: an ${part.type} block needs a \`source\` object` }
    }
  }
  return undefined
}

/** Where a mid-conversation system message may stand, as the Messages API places it; a problem else. */
function systemPlacement(messages: readonly Message[], i: number): HistoryProblem | undefined {
  const m = at(messages, i)
  const before = messages[i - 1]
  const after = messages[i + 1]
  if (!before)
    return problem(
      'history',
      i,
      undefined,
      'a system message cannot be the first message; use the top-level `system` field for instructions that apply from the start'
    )
  if (before.role === 'system' || after?.role === 'system') return problem('history', i, undefined, 'consecutive system messages are not allowed')
  const lastBlock = typeof before.content === 'string' ? undefined : before.content[before.content.length - 1]
  if (before.role !== 'user' && lastBlock?.type !== 'server_tool_use') {
    return problem('history', i, undefined, 'a system message must immediately follow a user message or an assistant message that ends in a server tool use')
  }
  if (after !== undefined && after.role !== 'assistant')
    return problem('history', i, undefined, 'a system message must be the last message or be followed by an assistant message')
  const blocks = typeof m.content === 'string' ? [] : m.content
  for (let j = 0; j < blocks.length; j++) {
    const bad = shapeProblem(blocks[j], i, j)
    if (bad) return bad
    if (at(blocks, j).type !== 'text') return problem('history', i, j, 'a system message holds text blocks only')
  }
  return undefined
}

/**
 * Checks the rules a history must keep to be cut safely. Returns the first problem, or
 * undefined when the history is sound. Never guesses a repair: the client hears where it went wrong.
 * System messages stand where the Messages API accepts them; the user and assistant turns around them
 * alternate as if they were not there.
 */
export function validateHistory(messages: readonly Message[]): HistoryProblem | undefined {
  if (messages.length === 0) return { kind: 'shape', path: '/messages', message: 'messages: at least one message is required' }
  if (at(messages, 0).role !== 'user') return problem('history', 0, undefined, 'the first message must have role "user"')

  let pending = new Map<string, number>() // tool_use id -> block index, from the previous assistant message
  let previous: Message | undefined // the previous user or assistant message
  let previousIndex = -1
  for (let i = 0; i < messages.length; i++) {
    const m = at(messages, i)
    if (m.role === 'system') {
      const bad = systemPlacement(messages, i)
      if (bad) return bad
      continue
    }
    // An assistant turn may go on after a system message that followed its server tool use.
    const continued = m.role === 'assistant' && messages[i - 1]?.role === 'system'
    if (previous !== undefined && previous.role === m.role && !continued) {
      return problem('history', i, undefined, `two "${m.role}" messages in a row; roles must alternate`)
    }
    const before = previousIndex
    previous = m
    previousIndex = i
    const blocks = typeof m.content === 'string' ? [] : m.content
    const answered = new Set<string>()
    const calls = new Map<string, number>()
    for (let j = 0; j < blocks.length; j++) {
      const bad = shapeProblem(blocks[j], i, j)
      if (bad) return bad
      const b = at(blocks, j)
      if (isToolUse(b)) {
        if (m.role !== 'assistant') return problem('history', i, j, 'a tool_use block belongs in an assistant message')
        if (calls.has(b.id)) return problem('history', i, j, `tool_use id "${b.id}" is used twice in this message`)
        calls.set(b.id, j)
      } else if (isToolResult(b)) {
        if (m.role !== 'user') return problem('history', i, j, 'a tool_result block belongs in a user message')
        if (!pending.has(b.tool_use_id)) {
          return problem('history', i, j, `tool_result "${b.tool_use_id}" answers no tool_use of the preceding assistant message`)
        }
        if (answered.has(b.tool_use_id)) return problem('history', i, j, `tool_use "${b.tool_use_id}" is answered twice`)
        answered.add(b.tool_use_id)
      }
    }
    if (m.role === 'user') {
      for (const [id, j] of pending) {
        if (!answered.has(id)) return problem('history', before, j, `tool_use "${id}" is not answered by a tool_result in messages[${i}]`)
      }
      pending = new Map()
    } else {
      pending = calls
    }
  }
  // Calls left in `pending` belong to the final assistant message: a pending call, which is allowed.
  return undefined
}
