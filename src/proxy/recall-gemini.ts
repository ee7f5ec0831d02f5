/**
 * The proxy's recall tool on Gemini's API (recall-tool.ts is the Messages API's): the same rules in that
 * API's contents. A round's answer is a model content; a recall call is a `functionCall` part of the tool,
 * taken out of the chunks as they come (the other parts go on at once), answered in a user content of
 * `functionResponse` parts; the continuation sends the round's parts as they came, thought signatures and
 * all. What the upstream saw in place of the client's answer is put back on the next request, the pending
 * responses beside the client's own in the user content after it (Gemini answers a turn's calls together).
 * Pure: the relay does the I/O.
 */
import { geminiUsage } from './usage.js'
import { createHash } from 'node:crypto'
import { PROXY_RECALL_TOOL } from '../compaction/index.js'
import { RECALL_TOOL_DEFINITION, type RecallCall, type Usage, addUsage, emptyUsage } from './recall-tool.js'
import { type DataEvent, dataEvents } from './events.js'

type Item = Record<string, unknown>
type Part = Record<string, unknown>

/** The tool as Gemini takes one: a Tool of one function declaration, in the API's own schema types. */
export const GEMINI_RECALL_TOOL_DEFINITION = {
  functionDeclarations: [
    {
      name: RECALL_TOOL_DEFINITION.name,
      description: RECALL_TOOL_DEFINITION.description,
      parameters: {
        type: 'OBJECT',
        properties: {
          query: { type: 'STRING', description: RECALL_TOOL_DEFINITION.input_schema.properties.query.description },
          limit: { type: 'INTEGER', description: RECALL_TOOL_DEFINITION.input_schema.properties.limit.description }
        },
        required: ['query']
      }
    }
  ]
} as const

/** What the upstream saw in place of one answer the client got, in Gemini's contents. */
export interface GeminiExchange {
  at: number
  visible: string
  /** The model contents and the user contents of recall responses between them, as the upstream saw them. */
  rounds: Item[]
  /** Response parts the client's next content must open with (the last round's recall calls, answered). */
  pending: Part[]
}

const partsOf = (c: Item | undefined): Part[] => (Array.isArray(c?.parts) ? (c.parts as Part[]) : [])
const callOf = (p: Part): { name?: unknown; args?: unknown; id?: unknown } | undefined =>
  typeof p.functionCall === 'object' && p.functionCall !== null ? (p.functionCall as { name?: unknown; args?: unknown; id?: unknown }) : undefined
const isRecall = (p: Part): boolean => callOf(p)?.name === PROXY_RECALL_TOOL
/** A part that is text and nothing else (a thought's flag aside): no signature, no call. */
const plainText = (p: Part): boolean => typeof p.text === 'string' && Object.keys(p).every((k) => k === 'text' || k === 'thought')

/**
 * What identifies a model content the client sends back: its text (thoughts left out, parts joined: a client
 * may merge a stream's text parts) and its calls (name and arguments), in order.
 */
export function geminiFingerprint(content: Item): string {
  const parts: unknown[] = []
  let text = ''
  for (const p of partsOf(content)) {
    if (p.thought === true) continue
    if (typeof p.text === 'string') text += p.text
    const call = callOf(p)
    if (call) parts.push([call.name, call.args ?? null])
  }
  return createHash('sha256')
    .update(JSON.stringify([text, parts]))
    .digest('base64url')
    .slice(0, 32)
}

/** The client's contents with every answer an exchange stands for put back as the upstream saw it. */
export function restoreGemini(contents: readonly Item[], exchanges: readonly GeminiExchange[]): { items: Item[]; restored: number } {
  if (exchanges.length === 0) return { items: [...contents], restored: 0 }
  const byPlace = new Map(exchanges.map((e) => [`${e.at}\u0000${e.visible}`, e]))
  const out: Item[] = []
  let restored = 0
  let opening: Part[] = []
  contents.forEach((c, i) => {
    const exchange = c.role === 'model' ? byPlace.get(`${i}\u0000${geminiFingerprint(c)}`) : undefined
    if (exchange) {
      out.push(...exchange.rounds.map((r) => structuredClone(r)))
      opening = exchange.pending.map((p) => structuredClone(p))
      restored++
      return
    }
    if (opening.length > 0) {
      // the recall's responses beside the client's own, in the content that answers the turn's calls
      out.push(c.role === 'model' ? { role: 'user', parts: opening } : { ...c, parts: [...opening, ...partsOf(c)] })
      if (c.role === 'model') out.push(c)
      opening = []
      return
    }
    out.push(c)
  })
  if (opening.length > 0) out.push({ role: 'user', parts: opening })
  return { items: out, restored }
}

/** The recall calls of a model content. */
export function geminiRecallCalls(content: Item): RecallCall[] {
  return partsOf(content)
    .map(callOf)
    .filter((call) => call?.name === PROXY_RECALL_TOOL)
    .map((found, k) => {
      const call = found ?? {}
      const args = (typeof call.args === 'object' && call.args !== null ? call.args : {}) as { query?: unknown; limit?: unknown }
      return { id: typeof call.id === 'string' ? call.id : `#${k}`, query: typeof args.query === 'string' ? args.query : '', limit: args.limit }
    })
}

/** The parts of a model content the client sees: all but the recall calls. */
export function geminiVisible(content: Item): Part[] {
  return partsOf(content).filter((p) => !isRecall(p))
}

/** Whether a model content calls one of the client's own functions. */
export function geminiCallsClient(content: Item): boolean {
  return partsOf(content).some((p) => callOf(p) !== undefined && !isRecall(p))
}

/** A result as the model reads it: a function response part (with the call's id where the call had one). */
export function geminiResult(call: RecallCall, text: string): Part {
  return { functionResponse: { ...(call.id.startsWith('#') ? {} : { id: call.id }), name: PROXY_RECALL_TOOL, response: { output: text } } }
}

/** Usage metadata summed over rounds, in Gemini's own fields (the last round's others kept; thoughts counted with the candidates). */
export function geminiUsageOf(last: unknown, total: Usage): Item {
  const prompt = total.input_tokens + total.cache_read_input_tokens
  const { thoughtsTokenCount: _thoughts, ...base } = (last ?? {}) as Item
  return {
    ...base,
    promptTokenCount: prompt,
    ...(total.cache_read_input_tokens > 0 ? { cachedContentTokenCount: total.cache_read_input_tokens } : {}),
    candidatesTokenCount: total.output_tokens,
    totalTokenCount: prompt + total.output_tokens
  }
}

type Chunk = DataEvent

/** A Gemini stream's chunks (`alt=sse`). */
export const parseGeminiChunks = dataEvents

export const geminiChunkText = (data: Item): string => `data: ${JSON.stringify(data)}\r\n\r\n`

const candidateOf = (data: Item | undefined): Item | undefined => (Array.isArray(data?.candidates) ? (data.candidates as Item[])[0] : undefined)

/**
 * One round of a streamed answer: the upstream's chunks in, the client's out. Each chunk goes on with its
 * recall calls taken out (a chunk left with nothing to say is not sent); the finish of the round is held for
 * the turn's close, the parts of its chunk sent on at once.
 */
export class GeminiRound {
  private readonly parts: Part[] = []
  /** The chunk that finished the round, held; the last usage the round reported. */
  end: Item | undefined
  private metadata: unknown
  failed = false

  take(chunk: Chunk): string[] {
    const data = chunk.data
    if (!data) return [chunk.raw]
    if (data.error !== undefined) {
      this.failed = true
      return [chunk.raw]
    }
    if (data.usageMetadata !== undefined) this.metadata = data.usageMetadata
    const candidate = candidateOf(data)
    if (!candidate) return [chunk.raw]
    const parts = partsOf(candidate.content as Item | undefined)
    this.parts.push(...parts)
    const shown = parts.filter((p) => !isRecall(p))
    const finished = candidate.finishReason !== undefined && candidate.finishReason !== null
    if (finished) this.end = data
    if (!finished && shown.length === parts.length) return [chunk.raw]
    if (shown.length === 0) return []
    // the finish held for the turn's close (its usage summed then); what it said goes on now
    const { finishReason: _reason, ...rest } = candidate
    const { usageMetadata: _usage, ...said } = data
    return [
      geminiChunkText({
        ...(finished ? said : data),
        candidates: [{ ...(finished ? rest : candidate), content: { ...(candidate.content as Item), parts: shown } }]
      })
    ]
  }

  get complete(): boolean {
    return this.end !== undefined
  }

  /**
   * The round's model content as the upstream gave it: every part, the recall's calls and every signature;
   * a stream's runs of plain text parts as the one text they are (as the API answers without streaming, and
   * as clients keep them).
   */
  message(): Item {
    const parts: Part[] = []
    for (const p of this.parts) {
      const last = parts.at(-1)
      if (last && plainText(last) && plainText(p) && last.thought === p.thought)
        parts[parts.length - 1] = { ...last, text: `${String(last.text)}${String(p.text)}` }
      else parts.push(p)
    }
    return { role: 'model', parts }
  }

  usage(): Usage {
    return addUsage(emptyUsage(), geminiUsage(this.metadata))
  }

  /** The turn's close: the held finish (an empty text, as the API ends a stream; STOP where the turn ends otherwise), the usage summed. */
  closing(total: Usage, reason?: 'ended'): string {
    const data = this.end ?? {}
    const candidate = candidateOf(data) ?? { index: 0 }
    return geminiChunkText({
      ...data,
      candidates: [{ ...candidate, content: { role: 'model', parts: [{ text: '' }] }, finishReason: reason ? 'STOP' : (candidate.finishReason ?? 'STOP') }],
      usageMetadata: geminiUsageOf(this.metadata, total)
    })
  }

  /** A text part saying the search could not be completed. */
  note(text: string): string {
    return geminiChunkText({ candidates: [{ content: { role: 'model', parts: [{ text }] }, index: 0 }] })
  }
}
