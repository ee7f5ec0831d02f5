/**
 * Responses API input items (`format: "openai-responses"`): messages (typed or not), `function_call` and
 * `custom_tool_call` answered by their `_output` items by `call_id`, reasoning items (their
 * `encrypted_content` verbatim) in the assistant's turn they belong to. An item type the gateway does not
 * know passes untouched: one with a `call_id` pairs with the item of that id as a call and its output do,
 * so that no cut falls between them.
 */
import { argumentsInput } from './chat.js'
import type { Block } from '../compaction/index.js'
import { type FormatRules, type ItemBlocks, contentBlocks, contentText, partText, problemAt } from './history.js'

const FIELD = 'messages'
type Item = Record<string, unknown>

const MESSAGE_ROLES = new Set(['user', 'assistant', 'system', 'developer'])

/** Whether an item is a message: typed so, or untyped with a role (an "easy" input message). */
function isMessage(item: Item): boolean {
  return item.type === 'message' || (item.type === undefined && typeof item.role === 'string')
}

/** An output item's text: a string, or its text parts. */
function outputText(output: unknown): string {
  if (typeof output === 'string') return output
  if (Array.isArray(output)) return output.map((p) => partText(p) ?? '').join('\n')
  return ''
}

const isOutputType = (type: string): boolean => type.endsWith('_output')

/**
 * One part of an output given as a list, as the core reads it: a text part as text; an image or a file at the
 * flat cost the estimate gives media (never clipped, never dropped); any other part as it is.
 */
function outputPart(part: unknown): Block {
  const text = partText(part)
  if (text !== undefined) return { type: 'text', text }
  const type = (part as { type?: unknown } | null)?.type
  if (type === 'input_image') return { type: 'image', source: { type: 'client_part' } }
  if (type === 'input_file') return { type: 'document', source: { type: 'client_part' } }
  return { type: 'client_part', part }
}

/** The call ids some output item of the history answers (computed once per history). */
const answeredIds = new WeakMap<readonly Item[], Set<string>>()
function answered(all: readonly Item[]): Set<string> {
  let ids = answeredIds.get(all)
  if (!ids) {
    ids = new Set(
      all.filter((i) => !isMessage(i) && typeof i.type === 'string' && isOutputType(i.type) && typeof i.call_id === 'string').map((i) => i.call_id as string)
    )
    answeredIds.set(all, ids)
  }
  return ids
}

/** Whether an item is a call an output must answer: a function or custom tool call, or a call of another kind that some output answers. */
function isAnsweredCall(item: Item, all: readonly Item[]): boolean {
  if (isMessage(item) || typeof item.type !== 'string' || typeof item.call_id !== 'string' || isOutputType(item.type)) return false
  return item.type === 'function_call' || item.type === 'custom_tool_call' || answered(all).has(item.call_id)
}

export const responsesRules: FormatRules = {
  field: FIELD,
  // a system or developer item of any type at the head (Codex sends its tools as an `additional_tools` one)
  isSystem: (item) => item.role === 'system' || item.role === 'developer',
  systemText: (item) => (isMessage(item) ? contentText(item.content) : JSON.stringify(item)),
  read(item, i, all): ItemBlocks | ReturnType<typeof problemAt> {
    const problem = (rest: string, message: string) => problemAt(FIELD, i, rest, message, 'shape')
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return problem('', 'an input item must be an object')
    // what the client cannot read (encrypted reasoning) is marked so: never summarized
    const unreadable = typeof item.encrypted_content === 'string'
    const opaque = (side: ItemBlocks['side']): ItemBlocks => ({
      side,
      blocks: [{ block: { type: 'client_item', item_type: String(item.type), ...(unreadable ? { opaque: true } : {}) }, source: { item: i } }]
    })
    if (isMessage(item)) {
      if (typeof item.role !== 'string' || !MESSAGE_ROLES.has(item.role))
        return problem('/role', `role must be one of user, assistant, system, developer (got ${JSON.stringify(item.role)})`)
      const blocks = contentBlocks(item.content, i, problem)
      if (!Array.isArray(blocks)) return blocks
      const side = item.role === 'assistant' ? 'assistant' : 'user'
      return blocks.length > 0 ? { side, blocks } : opaque(side)
    }
    if (typeof item.type !== 'string') return problem('/type', 'an input item needs a type (or a role, for a message)')
    const callId = item.call_id
    if (item.type === 'function_call' || item.type === 'custom_tool_call') {
      if (typeof callId !== 'string' || callId === '') return problem('/call_id', `a ${item.type} needs a call_id`)
      if (typeof item.name !== 'string') return problem('/name', `a ${item.type} needs the name of its tool`)
      if (item.type === 'custom_tool_call') {
        return {
          side: 'assistant',
          blocks: [
            {
              block: { type: 'tool_use', id: callId, name: item.name, input: { input: String(item.input ?? '') } },
              source: { item: i, field: '/input', as: 'input' }
            }
          ]
        }
      }
      const { input, as } = argumentsInput(item.arguments)
      return { side: 'assistant', blocks: [{ block: { type: 'tool_use', id: callId, name: item.name, input }, source: { item: i, field: '/arguments', as } }] }
    }
    if (typeof callId === 'string' && callId !== '') {
      if (isOutputType(item.type)) {
        // an output given as parts is read part by part, so that a clip keeps its shape (each text part
        // clipped in place, an image or a file as it came); a string output is clipped as the string it is
        if (Array.isArray(item.output))
          return {
            side: 'user',
            blocks: [
              { block: { type: 'tool_result', tool_use_id: callId, content: item.output.map(outputPart) }, source: { item: i, field: '/output', as: 'parts' } }
            ]
          }
        const field = typeof item.output === 'string' ? '/output' : undefined
        return {
          side: 'user',
          blocks: [{ block: { type: 'tool_result', tool_use_id: callId, content: outputText(item.output) }, source: { item: i, ...(field ? { field } : {}) } }]
        }
      }
      // a call of a kind the gateway does not read (a local shell, a computer): paired by its id with its output
      if (isAnsweredCall(item, all))
        return { side: 'assistant', blocks: [{ block: { type: 'tool_use', id: callId, name: item.type, input: {} }, source: { item: i } }] }
    }
    // reasoning and the model's own calls are the assistant's (reasoning precedes the item it belongs to);
    // any other item stays in the turn it stands in
    return opaque(item.type === 'reasoning' || item.type.endsWith('_call') ? 'assistant' : 'either')
  },
  calls: (item, all) => (isAnsweredCall(item, all) ? [item.call_id as string] : []),
  answers: (item) =>
    !isMessage(item) && typeof item.call_id === 'string' && typeof item.type === 'string' && isOutputType(item.type) ? item.call_id : undefined,
  summaryItem: (texts) => ({ type: 'message', role: 'user', content: texts.map((text) => ({ type: 'input_text', text })) })
}
