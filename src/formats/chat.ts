/**
 * Chat Completions messages (`format: "openai-chat"`): leading system and developer messages are the
 * system prompt; an assistant's `tool_calls` are answered by `tool` messages; content is a string or parts.
 */
import { type FormatRules, type ItemBlocks, type Source, contentBlocks, contentText, problemAt } from './history.js'

const FIELD = 'messages'
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool'])

type Item = Record<string, unknown>

/** A call's arguments as the core reads a tool's input: the JSON object they are, or the text itself. */
export function argumentsInput(text: unknown): { input: unknown; as: Source['as'] } {
  if (typeof text !== 'string') return { input: {}, as: 'json' }
  try {
    const value = JSON.parse(text) as unknown
    if (value && typeof value === 'object' && !Array.isArray(value)) return { input: value, as: 'json' }
  } catch {
    // not JSON: kept as the text it is
  }
  return { input: { input: text }, as: 'input' }
}

export const chatRules: FormatRules = {
  field: FIELD,
  isSystem: (item) => item.role === 'system' || item.role === 'developer',
  systemText: (item) => contentText(item.content),
  read(item, i): ItemBlocks | ReturnType<typeof problemAt> {
    const problem = (rest: string, message: string) => problemAt(FIELD, i, rest, message, 'shape')
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return problem('', 'a message must be an object')
    const role = item.role
    if (typeof role !== 'string' || !ROLES.has(role))
      return problem('/role', `role must be one of system, developer, user, assistant, tool (got ${JSON.stringify(role)})`)
    const content = contentBlocks(item.content, i, problem)
    if (!Array.isArray(content)) return content
    if (role === 'tool') {
      if (typeof item.tool_call_id !== 'string' || item.tool_call_id === '') return problem('/tool_call_id', 'a tool message needs the tool_call_id it answers')
      // a clipped output is written back as the one string it was clipped to
      const text = content.map((c) => (typeof c.block.text === 'string' ? c.block.text : '')).join('\n')
      return {
        side: 'user',
        blocks: [{ block: { type: 'tool_result', tool_use_id: item.tool_call_id, content: text }, source: { item: i, field: '/content' } }]
      }
    }
    if (role !== 'assistant') {
      // a system or developer message after the first turn is an instruction on the user's side of the turn
      return { side: 'user', blocks: content.length > 0 ? content : [{ block: { type: 'client_item' }, source: { item: i } }] }
    }
    const blocks = [...content]
    const calls = item.tool_calls
    if (calls !== undefined) {
      if (!Array.isArray(calls)) return problem('/tool_calls', 'tool_calls must be a list')
      for (const [k, call] of calls.entries()) {
        const c = call as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown }; custom?: { name?: unknown; input?: unknown } }
        if (typeof c.id !== 'string' || c.id === '') return problem(`/tool_calls/${k}/id`, 'a tool call needs an id')
        if (c.type === 'custom' && c.custom && typeof c.custom.name === 'string') {
          blocks.push({
            block: { type: 'tool_use', id: c.id, name: c.custom.name, input: { input: String(c.custom.input ?? '') } },
            source: { item: i, field: `/tool_calls/${k}/custom/input`, as: 'input' }
          })
          continue
        }
        if (!c.function || typeof c.function.name !== 'string') return problem(`/tool_calls/${k}/function/name`, 'a function call needs its function name')
        const { input, as } = argumentsInput(c.function.arguments)
        blocks.push({
          block: { type: 'tool_use', id: c.id, name: c.function.name, input },
          source: { item: i, field: `/tool_calls/${k}/function/arguments`, as }
        })
      }
    }
    return { side: 'assistant', blocks: blocks.length > 0 ? blocks : [{ block: { type: 'client_item' }, source: { item: i } }] }
  },
  calls: (item) => (item.role === 'assistant' && Array.isArray(item.tool_calls) ? item.tool_calls.map((c) => String((c as { id?: unknown }).id)) : []),
  answers: (item) => (item.role === 'tool' && typeof item.tool_call_id === 'string' ? item.tool_call_id : undefined),
  summaryItem: (texts) => ({ role: 'user', content: texts.map((text) => ({ type: 'text', text })) })
}

export type ChatItem = Item
