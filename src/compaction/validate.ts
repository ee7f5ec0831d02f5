import { type Block, type Message, isToolResult, isToolUse } from './types.js'

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

function shapeProblem(block: Block, i: number, j: number): HistoryProblem | undefined {
  if (block.type === 'text' && typeof block.text !== 'string') return problem('shape', i, j, 'a text block needs a string `text`')
  if (block.type === 'tool_use') {
    if (typeof block.id !== 'string' || block.id === '') return problem('shape', i, j, 'a tool_use block needs a string `id`')
    if (typeof block.name !== 'string') return problem('shape', i, j, 'a tool_use block needs a string `name`')
    if (!('input' in block)) return problem('shape', i, j, 'a tool_use block needs an `input`')
  }
  if (block.type === 'tool_result') {
    if (typeof block.tool_use_id !== 'string') return problem('shape', i, j, 'a tool_result block needs a string `tool_use_id`')
    const c = block.content
    if (c !== undefined && typeof c !== 'string' && !Array.isArray(c)) {
      return problem('shape', i, j, 'a tool_result `content` is a string or an array of blocks')
    }
  }
  return undefined
}

/**
 * Checks the rules a history must keep to be cut safely (DESIGN 2.1). Returns the first problem, or
 * undefined when the history is sound. Never guesses a repair: the client hears where it went wrong.
 */
export function validateHistory(messages: readonly Message[]): HistoryProblem | undefined {
  if (messages.length === 0) return { kind: 'shape', path: '/messages', message: 'messages: at least one message is required' }
  if (messages[0]!.role !== 'user') return problem('history', 0, undefined, 'the first message must have role "user"')

  let pending = new Map<string, number>() // tool_use id -> block index, from the previous assistant message
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    if (i > 0 && messages[i - 1]!.role === m.role) {
      return problem('history', i, undefined, `two "${m.role}" messages in a row; roles must alternate`)
    }
    const blocks = typeof m.content === 'string' ? [] : m.content
    const answered = new Set<string>()
    const calls = new Map<string, number>()
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j]!
      const bad = shapeProblem(b, i, j)
      if (bad) return bad
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
        if (!answered.has(id)) return problem('history', i - 1, j, `tool_use "${id}" is not answered by a tool_result in messages[${i}]`)
      }
      pending = new Map()
    } else {
      pending = calls
    }
  }
  // Calls left in `pending` belong to the final assistant message: a pending call, which is allowed.
  return undefined
}
