/** The Anthropic Messages shapes the core reads. Unknown block types pass through untouched. */

/**
 * `system`: a mid-conversation system message (an instruction from the client, not a turn of the
 * conversation); it sits right after a user message and before an assistant turn or at the end.
 */
export type Role = 'user' | 'assistant' | 'system'

export interface Block {
  type: string
  [field: string]: unknown
}

export interface TextBlock extends Block {
  type: 'text'
  text: string
}

export interface ToolUseBlock extends Block {
  type: 'tool_use'
  id: string
  name: string
  input: unknown
}

export interface ToolResultBlock extends Block {
  type: 'tool_result'
  tool_use_id: string
  content?: string | Block[]
  is_error?: boolean
}

export interface Message {
  role: Role
  content: string | Block[]
  [field: string]: unknown
}

export type SystemPrompt = string | Block[]

export function blocksOf(message: Message): Block[] {
  return typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content
}

export function isTextBlock(block: Block): block is TextBlock {
  return block.type === 'text' && typeof block.text === 'string'
}

export function isToolUse(block: Block): block is ToolUseBlock {
  return block.type === 'tool_use'
}

export function isToolResult(block: Block): block is ToolResultBlock {
  return block.type === 'tool_result'
}

/** A user message that carries no tool_result: something a person (or the client) asked. */
export function isPromptMessage(message: Message): boolean {
  return message.role === 'user' && !blocksOf(message).some(isToolResult)
}

export function isSystemMessage(message: Message): boolean {
  return message.role === 'system'
}

/** The text of a tool_result's content, however it was sent. */
export function toolResultText(block: ToolResultBlock): string {
  const content = block.content
  if (content === undefined) return ''
  if (typeof content === 'string') return content
  return content.map((b) => (isTextBlock(b) ? b.text : `[${b.type}]`)).join('\n')
}
