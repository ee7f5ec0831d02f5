/**
 * Gemini's `contents` (`format: "gemini"`): each content has a role (`user`, `model`; none reads as the
 * user's) and parts. A `model` content's `functionCall` parts are answered by the next `user` content's
 * `functionResponse` parts, by `id` where the call has one, else by name and order. A part that carries a
 * `thoughtSignature`, a `thought` part, inline data and file data are kept as they came (never clipped nor
 * moved: they stay in their content, which is kept or summarized whole); text and a function response's
 * `output` are what a bound may clip. The system prompt is the body's `systemInstruction`, never in `contents`.
 */
import { type FormatRules, type ItemBlocks, type Source, problemAt } from './history.js'

/** Where the contents are in a `/v1/compact` body (the proxy names them `contents` in its errors). */
const FIELD = 'messages'

type Part = Record<string, unknown>

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The pairing ids of a content's calls (or of the responses answering them): the name and its place among
 * the content's calls of that name. Ids (`id`) are not needed to pair a turn whose responses all come in the
 * next content, and a client may give them on one side only (its calls, not its responses): by name and
 * order, each call is answered whatever the ids say, as the API requires.
 */
function ids(parts: readonly Part[], key: 'functionCall' | 'functionResponse'): string[] {
  const seen = new Map<string, number>()
  const out: string[] = []
  for (const part of parts) {
    const f = part[key]
    if (!isObject(f)) continue
    const name = String(f.name ?? '')
    const k = seen.get(name) ?? 0
    seen.set(name, k + 1)
    out.push(`${name}#${k}`)
  }
  return out
}

function partsOf(item: Record<string, unknown>): Part[] {
  return Array.isArray(item.parts) ? (item.parts as Part[]) : []
}

/** The text of `systemInstruction` (a content, or a string): counted, never compacted. */
export function systemInstructionText(value: unknown): string {
  if (typeof value === 'string') return value
  if (!isObject(value)) return ''
  return partsOf(value)
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .filter((t) => t !== '')
    .join('\n')
}

export const geminiRules: FormatRules = {
  field: FIELD,
  wholeTurns: true,
  isSystem: () => false,
  systemText: () => '',
  read(item, i): ItemBlocks | ReturnType<typeof problemAt> {
    const problem = (rest: string, message: string) => problemAt(FIELD, i, rest, message, 'shape')
    if (!isObject(item)) return problem('', 'a content must be an object')
    const role = item.role ?? 'user'
    if (role !== 'user' && role !== 'model') return problem('/role', `role must be "user" or "model" (got ${JSON.stringify(role)})`)
    if (!Array.isArray(item.parts) || item.parts.length === 0) return problem('/parts', 'a content needs at least one part')
    const parts = item.parts as unknown[]
    const calls = role === 'model' ? ids(parts.filter(isObject), 'functionCall') : []
    const answers = role === 'user' ? ids(parts.filter(isObject), 'functionResponse') : []
    let call = 0
    let answer = 0
    const blocks: { block: Record<string, unknown> & { type: string }; source: Source }[] = []
    for (const [p, part] of parts.entries()) {
      if (!isObject(part) || Object.keys(part).length === 0)
        return problem(`/parts/${p}`, 'a part must be an object with data (text, functionCall, functionResponse, inlineData, fileData…)')
      const at: Source = { item: i, part: p }
      // what must go back exactly as it came: never clipped, never moved from its content
      if (part.thoughtSignature !== undefined || part.thought === true || part.inlineData !== undefined || part.fileData !== undefined) {
        if (isObject(part.functionCall)) {
          const fc = part.functionCall
          blocks.push({ block: { type: 'tool_use', id: calls[call++] as string, name: String(fc.name ?? ''), input: fc.args ?? {} }, source: at })
        } else blocks.push({ block: { type: 'client_part', part }, source: at })
        continue
      }
      if (typeof part.text === 'string') {
        if (part.text !== '') blocks.push({ block: { type: 'text', text: part.text }, source: { ...at, field: `/parts/${p}/text` } })
        continue
      }
      if (isObject(part.functionCall)) {
        if (role !== 'model') return problem(`/parts/${p}/functionCall`, 'a function call is the model\'s: it must be in a "model" content')
        const fc = part.functionCall
        if (typeof fc.name !== 'string' || fc.name === '') return problem(`/parts/${p}/functionCall/name`, 'a function call needs its name')
        blocks.push({ block: { type: 'tool_use', id: calls[call++] as string, name: fc.name, input: fc.args ?? {} }, source: at })
        continue
      }
      if (isObject(part.functionResponse)) {
        if (role !== 'user') return problem(`/parts/${p}/functionResponse`, 'a function response answers the model: it must be in a "user" content')
        const fr = part.functionResponse
        if (typeof fr.name !== 'string' || fr.name === '')
          return problem(`/parts/${p}/functionResponse/name`, 'a function response needs the name of the function it answers')
        const response = isObject(fr.response) ? fr.response : {}
        const output = response.output
        const id = answers[answer++] as string
        blocks.push(
          typeof output === 'string'
            ? {
                block: { type: 'tool_result', tool_use_id: id, content: output, ...(response.error !== undefined ? { is_error: true } : {}) },
                source: { ...at, field: `/parts/${p}/functionResponse/response/output` }
              }
            : {
                block: {
                  type: 'tool_result',
                  tool_use_id: id,
                  content: JSON.stringify(fr.response ?? {}),
                  ...(response.error !== undefined ? { is_error: true } : {})
                },
                source: at
              }
        )
        continue
      }
      blocks.push({ block: { type: 'client_part', part }, source: at })
    }
    return { side: role === 'model' ? 'assistant' : 'user', blocks: blocks.length > 0 ? blocks : [{ block: { type: 'client_item' }, source: { item: i } }] }
  },
  calls: (item) => (isObject(item) && item.role === 'model' ? ids(partsOf(item).filter(isObject), 'functionCall') : []),
  answers: (item) => (isObject(item) && (item.role ?? 'user') === 'user' ? ids(partsOf(item).filter(isObject), 'functionResponse') : []),
  summaryItem: (texts) => ({ role: 'user', parts: texts.map((text) => ({ text })) })
}
