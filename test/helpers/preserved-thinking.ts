/**
 * The Messages API's preserved thinking, written from its documentation ("Preserved thinking", "Prefix
 * checks on thinking blocks"), independent of the gateway's code:
 *
 * - a thinking block's signature binds it to its prefix: the top-level `system`, the tools loaded into the
 *   prompt (a tool with `defer_loading: true` is not) and every message before it (a string and a single
 *   text block read the same; `cache_control` is no part of it), and the blocks before it in its message;
 * - a request that sends thinking blocks back is checked: once one block's prefix differs from the one it
 *   was produced on, that block and every later thinking block are invalid (leaving out or moving a block
 *   between others changes the prefix of the ones after it). The request is refused with a 400, or the
 *   invalid blocks are dropped where it sets `thinking.block_binding.prefix_mismatch_behavior: "drop_block"`;
 * - with thinking `enabled`, the last assistant message of an open tool loop must begin with a thinking block.
 */
import { createHmac } from 'node:crypto'

/** The models with preserved thinking, as the documentation lists them. */
export const PRESERVED_THINKING_MODELS = [
  'claude-fable-5-2',
  'claude-mythos-5-2',
  'claude-fable-5-1',
  'claude-mythos-5-1',
  'claude-opus-5-5',
  'claude-sonnet-5-5',
  'claude-haiku-5-5'
] as const

const SECRET = 'fake-upstream-thinking-key'

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

function withoutCacheControl(block: unknown): unknown {
  if (!isObj(block)) return block
  const { cache_control: _mark, ...rest } = block
  return rest
}

function blocksOf(content: unknown): unknown[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  return Array.isArray(content) ? content.map(withoutCacheControl) : []
}

const isThinking = (b: unknown): b is Obj => isObj(b) && (b.type === 'thinking' || b.type === 'redacted_thinking')

/** The canonical prefix of the block at (message `i`, block `j`) of `body`. */
function prefixOf(body: Obj, i: number, j: number): string {
  const tools = Array.isArray(body.tools) ? body.tools.filter((t) => !(isObj(t) && t.defer_loading === true)).map(withoutCacheControl) : []
  const messages = Array.isArray(body.messages) ? (body.messages as unknown[]) : []
  const before = messages.slice(0, i).map((m) => (isObj(m) ? { role: m.role, content: blocksOf(m.content) } : m))
  const own = isObj(messages[i]) ? blocksOf((messages[i] as Obj).content).slice(0, j) : []
  return JSON.stringify({ system: blocksOf(body.system ?? ''), tools, before, own })
}

/** The signature the fake gives a block produced at (message `i`, block `j`) of `body`'s conversation. */
export function thinkingSignature(body: Obj, i: number, j: number): string {
  return `fake-sig-${createHmac('sha256', SECRET)
    .update(prefixOf(body, i, j))
    .digest('base64url')}`
}

/** A thinking block as the fake produces it first in the answer to `body` (the display `omitted` gives empty text). */
export function producedThinking(body: Obj): { type: 'thinking'; thinking: string; signature: string } {
  const messages = Array.isArray(body.messages) ? body.messages : []
  const thinking = isObj(body.thinking) ? body.thinking : {}
  return {
    type: 'thinking',
    thinking: thinking.display === 'omitted' ? '' : 'The next step follows from the last result.',
    signature: thinkingSignature(body, messages.length, 0)
  }
}

/** Whether the request asks for thinking (`enabled` or `adaptive`). */
export function thinkingOn(body: Obj): boolean {
  const thinking = body.thinking
  return isObj(thinking) && (thinking.type === 'enabled' || thinking.type === 'adaptive')
}

export interface PrefixCheck {
  /** The 400's message, where the request is refused. */
  refusal?: string
  /** The body as the model reads it: the invalid blocks dropped where the request asked for that. */
  body: Obj
  /** Blocks dropped (drop_block). */
  dropped: number
}

/** The prefix check of a request to a model with preserved thinking. */
export function checkThinkingPrefix(body: Obj): PrefixCheck {
  const messages = Array.isArray(body.messages) ? (body.messages as unknown[]) : []
  let invalidFrom: [number, number] | undefined
  outer: for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (!isObj(m) || m.role !== 'assistant' || !Array.isArray(m.content)) continue
    for (let j = 0; j < m.content.length; j++) {
      const b = m.content[j]
      if (!isThinking(b)) continue
      const signature = b.type === 'thinking' ? b.signature : b.data
      if (signature !== thinkingSignature(body, i, j)) {
        invalidFrom = [i, j]
        break outer
      }
    }
  }
  let checked = body
  let dropped = 0
  if (invalidFrom) {
    const [i, j] = invalidFrom
    const binding = isObj(body.thinking) && isObj(body.thinking.block_binding) ? body.thinking.block_binding : {}
    if (binding.prefix_mismatch_behavior !== 'drop_block')
      return {
        refusal: `messages.${i}.content.${j}: this thinking block's prefix (system, tools and the messages before it) changed after the block was produced; it and every later thinking block are invalid. Send the conversation unchanged, or set thinking.block_binding.prefix_mismatch_behavior to "drop_block".`,
        body,
        dropped: 0
      }
    const kept = messages.map((m, k) => {
      if (k < i || !isObj(m) || m.role !== 'assistant' || !Array.isArray(m.content)) return m
      const content = m.content.filter((b, l) => (k === i && l < j) || !isThinking(b))
      dropped += m.content.length - content.length
      return { ...m, content }
    })
    checked = { ...body, messages: kept }
  }
  const refusal = openLoopRefusal(checked)
  return refusal ? { refusal, body, dropped } : { body: checked, dropped }
}

/** With thinking `enabled`: the last assistant message of an open tool loop must begin with a thinking block. */
function openLoopRefusal(body: Obj): string | undefined {
  if (!isObj(body.thinking) || body.thinking.type !== 'enabled') return undefined
  const messages = (Array.isArray(body.messages) ? body.messages : []).filter((m) => isObj(m) && m.role !== 'system') as Obj[]
  const last = messages.at(-1)
  if (!last || last.role !== 'user' || !blocksOf(last.content).some((b) => isObj(b) && b.type === 'tool_result')) return undefined
  const k = messages.length - 2
  const assistant = messages[k]
  if (!assistant || assistant.role !== 'assistant') return undefined
  const first = blocksOf(assistant.content)[0]
  if (isThinking(first)) return undefined
  return `messages.${k}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${isObj(first) ? String(first.type) : 'nothing'}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceding the lastmost set of \`tool_use\` and \`tool_result\` blocks). To avoid this requirement, disable \`thinking\`.`
}
