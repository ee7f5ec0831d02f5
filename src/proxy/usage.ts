/** What the upstream billed for one answer, as the Messages API reports it in `usage`. */
export interface UpstreamUsage {
  input_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  output_tokens: number
}

const FIELDS = ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'output_tokens'] as const

/** The most of a JSON answer kept to read its usage from; a larger one is relayed and not read. */
const JSON_CAP_BYTES = 8 * 1024 * 1024
/** The longest event line kept while it arrives (a usage event is short; a long line is some block's text). */
const LINE_CAP_BYTES = 64 * 1024
const EMPTY = Buffer.alloc(0)
const NEWLINE = 0x0a
const USAGE = Buffer.from('"usage"')

/**
 * Reads the upstream's `usage` from an answer as it is relayed, without holding the relay: an event stream's
 * `message_start` and `message_delta` events (the later counts replace the earlier ones, as the API's are
 * cumulative), or a JSON answer's `usage` once it has all come. Fed the chunks the client is sent.
 */
export class UsageTap {
  private usage: Partial<UpstreamUsage> = {}
  /** The bytes of the event line still arriving. */
  private line: Buffer = EMPTY
  private readonly json: Buffer[] = []
  private jsonBytes = 0

  constructor(private readonly stream: boolean) {}

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
    if (end < 0 || bytes.indexOf(USAGE) < 0 || bytes.indexOf(USAGE) > end) return
    for (const l of bytes.toString('utf8', 0, end).split('\n')) if (l.startsWith('data:') && l.includes('"usage"')) this.readEvent(l.slice(5))
  }

  /** What the answer said it cost, or undefined where it said nothing (an error, or an answer too large to read). */
  end(): UpstreamUsage | undefined {
    if (!this.stream && this.jsonBytes > 0 && this.jsonBytes <= JSON_CAP_BYTES) {
      try {
        this.take((JSON.parse(Buffer.concat(this.json).toString('utf8')) as { usage?: unknown }).usage)
      } catch {
        // not JSON: nothing to read
      }
    }
    if (this.usage.input_tokens === undefined && this.usage.output_tokens === undefined) return undefined
    return { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0, ...this.usage }
  }

  private readEvent(data: string): void {
    try {
      const event = JSON.parse(data) as { type?: string; message?: { usage?: unknown }; usage?: unknown }
      this.take(event.type === 'message_start' ? event.message?.usage : event.usage)
    } catch {
      // a line that is not one event's JSON
    }
  }

  private take(usage: unknown): void {
    if (typeof usage !== 'object' || usage === null) return
    for (const field of FIELDS) {
      const value = (usage as Record<string, unknown>)[field]
      if (typeof value === 'number' && Number.isFinite(value) && value >= 0) this.usage[field] = value
    }
  }
}
