import type { Block, Message } from '../../src/compaction/index.js'

/** Small builders for hand-written histories. */
export const user = (text: string): Message => ({ role: 'user', content: text })

export const assistant = (...content: (string | Block)[]): Message => ({
  role: 'assistant',
  content: content.map((c) => (typeof c === 'string' ? { type: 'text', text: c } : c))
})

export const call = (id: string, name: string, input: Record<string, unknown>): Block => ({ type: 'tool_use', id, name, input })

export const result = (id: string, content: string | Block[], isError = false): Block => ({
  type: 'tool_result',
  tool_use_id: id,
  content,
  ...(isError ? { is_error: true } : {})
})

export const results = (...blocks: Block[]): Message => ({ role: 'user', content: blocks })

/** A step: an assistant message calling one shell command and the user message with its output. */
export function shellStep(id: string, command: string, output: string, isError = false): Message[] {
  return [assistant(call(id, 'bash', { command })), results(result(id, output, isError))]
}
