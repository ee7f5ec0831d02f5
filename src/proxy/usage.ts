/** What the upstream billed for one answer, as the Messages API reports it in `usage` (the other APIs' read into its terms). */
export interface UpstreamUsage {
  input_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  output_tokens: number
}

/** Whose answers a tap reads: the Messages API's, Chat Completions', the Responses API's or Gemini's. */
export type UsageFormat = 'messages' | 'chat' | 'responses' | 'gemini'

/** Input tokens of which `cached` were read from the cache, and output tokens, in the Messages API's terms (OpenAI's and Gemini's APIs bill no cache writes). */
function withCacheReads(input: number | undefined, cached: number | undefined, output: number): UpstreamUsage {
  const read = cached ?? 0
  return { input_tokens: Math.max(0, (input ?? 0) - read), cache_creation_input_tokens: 0, cache_read_input_tokens: read, output_tokens: output }
}

/** Chat Completions' usage in the Messages API's terms (the session's cost reads those). */
export function chatUsage(usage: unknown): UpstreamUsage {
  const u = (usage ?? {}) as { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } }
  return withCacheReads(u.prompt_tokens, u.prompt_tokens_details?.cached_tokens, u.completion_tokens ?? 0)
}

/** The Responses API's usage in the Messages API's terms (the session's cost reads those). */
export function responsesUsage(usage: unknown): UpstreamUsage {
  const u = (usage ?? {}) as { input_tokens?: number; output_tokens?: number; input_tokens_details?: { cached_tokens?: number } }
  return withCacheReads(u.input_tokens, u.input_tokens_details?.cached_tokens, u.output_tokens ?? 0)
}

/** Gemini's usage metadata in the Messages API's terms (the session's cost reads those; thoughts are output). */
export function geminiUsage(metadata: unknown): UpstreamUsage {
  const u = (metadata ?? {}) as { promptTokenCount?: number; cachedContentTokenCount?: number; candidatesTokenCount?: number; thoughtsTokenCount?: number }
  return withCacheReads(u.promptTokenCount, u.cachedContentTokenCount, (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0))
}

/** A usage as the Messages API reports it (a field it leaves out is undefined: its later events replace only what they hold). */
function messagesUsage(usage: unknown): Partial<UpstreamUsage> {
  const out: Partial<UpstreamUsage> = {}
  for (const field of FIELDS) {
    const value = (usage as Record<string, unknown>)[field]
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) out[field] = value
  }
  return out
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null

/**
 * Each API's answer, whole or one of its events, read for its usage: the usage it holds (undefined where it holds
 * none). Streams: the Messages API's `message_start` and `message_delta` (cumulative, each replacing what it
 * holds); Chat Completions' last chunk (where the client asked for it, `stream_options.include_usage`); the
 * Responses API's `response.completed` (or its end otherwise); Gemini's chunks, each with the counts so far.
 */
const READERS: Record<UsageFormat, (value: unknown) => Partial<UpstreamUsage> | undefined> = {
  messages: (v) => {
    if (!isObject(v)) return undefined
    const usage = v.type === 'message_start' && isObject(v.message) ? v.message.usage : v.usage
    return isObject(usage) ? messagesUsage(usage) : undefined
  },
  chat: (v) => (isObject(v) && isObject(v.usage) ? chatUsage(v.usage) : undefined),
  responses: (v) => {
    if (!isObject(v)) return undefined
    const usage = isObject(v.response) ? v.response.usage : v.usage
    return isObject(usage) ? responsesUsage(usage) : undefined
  },
  gemini: (v) => {
    // a stream asked for without `alt=sse` is one JSON array of the chunks
    const last = Array.isArray(v) ? v.at(-1) : v
    return isObject(last) && isObject(last.usageMetadata) ? geminiUsage(last.usageMetadata) : undefined
  }
}

const FIELDS = ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'output_tokens'] as const

/** The most of a JSON answer kept to read its usage from; a larger one is relayed and not read. */
const JSON_CAP_BYTES = 8 * 1024 * 1024
/** The longest event line kept while it arrives (a usage event is short; a long line is some block's text). */
const LINE_CAP_BYTES = 64 * 1024
const EMPTY = Buffer.alloc(0)
const NEWLINE = 0x0a
/** The key an event that holds a usage has, as its bytes: only lines that hold it are parsed. */
const KEYS: Record<UsageFormat, Buffer> = {
  messages: Buffer.from('"usage"'),
  chat: Buffer.from('"usage"'),
  responses: Buffer.from('"usage"'),
  gemini: Buffer.from('"usageMetadata"')
}

/**
 * Reads the upstream's usage from an answer as it is relayed, without holding the relay: the events of a
 * stream that hold one (READERS: the later counts replace the earlier ones, as the APIs' are cumulative), or
 * a JSON answer's once it has all come. Fed the chunks the client is sent.
 */
export class UsageTap {
  private usage: Partial<UpstreamUsage> = {}
  /** The bytes of the event line still arriving. */
  private line: Buffer = EMPTY
  private readonly json: Buffer[] = []
  private jsonBytes = 0

  private readonly key: Buffer

  constructor(
    private readonly stream: boolean,
    private readonly format: UsageFormat = 'messages'
  ) {
    this.key = KEYS[format]
  }

  push(chunk: Buffer): void {
    if (!this.stream) {
      this.jsonBytes += chunk.length
      if (this.jsonBytes <= JSON_CAP_BYTES) this.json.push(chunk)
      return
    }
    const bytes = this.line.length > 0 ? Buffer.concat([this.line, chunk]) : chunk
    const end = bytes.lastIndexOf(NEWLINE)
    this.line = end < 0 ? bytes : bytes.subarray(end + 1)
    if (this.line.length > LINE_CAP_BYTES) this.line = EMPTY
    // only lines that hold a usage are read as text (most of a long answer's events are its text's deltas)
    const at = end < 0 ? -1 : bytes.indexOf(this.key)
    if (at < 0 || at > end) return
    const key = this.key.toString()
    for (const l of bytes.toString('utf8', 0, end).split('\n')) if (l.startsWith('data:') && l.includes(key)) this.read(l.slice(5))
  }

  /** What the answer said it cost, or undefined where it said nothing (an error, or an answer too large to read). */
  end(): UpstreamUsage | undefined {
    if (!this.stream && this.jsonBytes > 0 && this.jsonBytes <= JSON_CAP_BYTES) this.read(Buffer.concat(this.json).toString('utf8'))
    if (this.usage.input_tokens === undefined && this.usage.output_tokens === undefined) return undefined
    return { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0, ...this.usage }
  }

  /** One answer or event's JSON, its usage taken where it holds one. */
  private read(json: string): void {
    let value: unknown
    try {
      value = JSON.parse(json) as unknown
    } catch {
      return // not one event's JSON, or an answer that is not JSON
    }
    const usage = READERS[this.format](value)
    if (usage) this.usage = { ...this.usage, ...usage }
  }
}
