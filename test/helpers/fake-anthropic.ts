import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { messagesApiRefusal } from './messages-api-rules.js'
import { PRESERVED_THINKING_MODELS, checkThinkingPrefix, producedThinking, thinkingOn } from './preserved-thinking.js'

/** What the fake answers to one request. */
export interface FakeReply {
  status?: number
  headers?: Record<string, string>
  /** Milliseconds to wait before answering. */
  delayMs?: number
  /** Answered once this settles (a test's move made first, mid-session). */
  after?: Promise<unknown>
  /** For a 200: the input of the record_summary tool call... */
  toolInput?: unknown
  /** ...or a plain text answer with no tool call... */
  text?: string
  /** ...or these content blocks as they are (a scripted agent's tool calls). */
  content?: ContentBlock[]
  stopReason?: string
  /** For an error status: the error type in the body. */
  errorType?: string
  /** For a streamed answer (a request with stream: true): milliseconds between events. */
  eventDelayMs?: number
  /** For a streamed answer: the connection is cut after this many events... */
  breakAfterEvents?: number
  /** ...and after this many bytes of the next one (inside an event, as a dropped connection may cut it). */
  breakInsideEventAt?: number
}

export interface ReceivedRequest {
  headers: IncomingHttpHeaders
  body: {
    model: string
    max_tokens: number
    system: string
    tools: { name: string; input_schema: unknown }[]
    tool_choice: unknown
    messages: { role: string; content: unknown }[]
    [k: string]: unknown
  }
  raw: string
  /** The request's path (/v1/messages, /v1/messages/count_tokens). */
  path: string
  /** When it arrived (performance.now()). */
  at?: number
  /** What the simulated prompt cache made of it. */
  cache?: CacheUse
}

export interface CacheUse {
  /** The prompt's tokens (characters / 4). */
  tokens: number
  /** Of which read from cache. */
  read: number
  /** Of which written to the cache (from where the read ends to the last breakpoint). */
  written: number
}

/** How far back from a breakpoint the API looks for a cached prefix, in blocks. */
const CACHE_LOOKBACK_BLOCKS = 20

/**
 * The Messages API's prompt cache as its documentation describes it: a prompt is a sequence of blocks
 * (tools, then system, then each message's blocks); every block with `cache_control` is a breakpoint whose
 * prefix is written to the cache, and a request reads the longest prefix cached earlier that ends at one
 * of its breakpoints or up to 20 blocks before one. A prefix is its content: `cache_control` itself is no
 * part of it, so a breakpoint moved to the newest message still finds the earlier one.
 */
/**
 * What a fake's error answers say of their retry, unless a test names one: retry at once (`retry-after-ms`,
 * which both SDKs read first; 1 ms, since they take 0 as no advice and wait their own back-off, 0.5-8 s).
 */
export const RETRY_AT_ONCE: Readonly<Record<string, string>> = { 'retry-after-ms': '1' }

/** RETRY_AT_ONCE where the reply's own headers say nothing of a retry (a test's own retry-after is honoured as sent). */
export function retryHeaders(own: Record<string, string> | undefined): Record<string, string> {
  return own && Object.keys(own).some((h) => h.toLowerCase().startsWith('retry-after')) ? {} : { ...RETRY_AT_ONCE }
}

export class PromptCache {
  private readonly written = new Map<string, number>()

  take(body: ReceivedRequest['body']): CacheUse {
    const blocks: unknown[] = []
    const roles: string[] = []
    const push = (role: string, b: unknown): void => {
      blocks.push(b)
      roles.push(role)
    }
    for (const t of (body.tools ?? []) as unknown[]) push('tools', t)
    const system = body.system as unknown
    if (typeof system === 'string') push('system', { type: 'text', text: system })
    else if (Array.isArray(system)) for (const b of system) push('system', b)
    for (const m of body.messages ?? []) {
      if (typeof m.content === 'string') push(m.role, { type: 'text', text: m.content })
      else if (Array.isArray(m.content)) for (const b of m.content) push(m.role, b)
    }
    const hashes: string[] = []
    const chars: number[] = []
    const breakpoints: number[] = []
    const hash = createHash('sha256')
    let total = 0
    blocks.forEach((b, i) => {
      const { cache_control: mark, ...content } = (b ?? {}) as Record<string, unknown>
      const text = JSON.stringify(content)
      hash.update(`${roles[i]}\u0000${text}\u0001`)
      total += text.length
      hashes.push(hash.copy().digest('hex'))
      chars.push(total)
      if (mark) breakpoints.push(i)
    })
    let read = 0
    for (const b of breakpoints) {
      for (let p = b; p >= Math.max(0, b - CACHE_LOOKBACK_BLOCKS); p--) {
        const h = hashes[p] as string
        if (this.written.has(h)) {
          read = Math.max(read, chars[p] as number)
          break
        }
      }
    }
    for (const b of breakpoints) this.written.set(hashes[b] as string, chars[b] as number)
    const last = breakpoints.length > 0 ? (chars[breakpoints[breakpoints.length - 1] as number] as number) : 0
    return { tokens: Math.ceil(total / 4), read: Math.ceil(read / 4), written: Math.max(0, Math.ceil(last / 4) - Math.ceil(read / 4)) }
  }
}

/** What a model without the API's context management refuses: the field, and a `compaction` block in the history. */
function contextManagementRefusal(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined
  if ('context_management' in body) return 'context_management: Extra inputs are not permitted'
  const messages = (body as { messages?: unknown }).messages
  if (!Array.isArray(messages)) return undefined
  for (let i = 0; i < messages.length; i++) {
    const content = (messages[i] as { content?: unknown } | null)?.content
    if (!Array.isArray(content)) continue
    const j = content.findIndex((b: unknown) => (b as { type?: unknown } | null)?.type === 'compaction')
    if (j >= 0) return `messages.${i}.content.${j}.type: Input tag 'compaction' found using 'type' does not match any of the expected tags`
  }
  return undefined
}

/**
 * A local stand-in for the Anthropic Messages API on loopback: the real SDK talks to it through
 * ANTHROPIC_BASE_URL. Replies come from a queue, then from `fallback`; every request is recorded.
 */
export class FakeAnthropic {
  readonly requests: ReceivedRequest[] = []
  /** Requests whose client went away before they were answered (an aborted SDK call). */
  aborted = 0
  /** When the last event of a streamed answer was written (performance.now()). */
  lastEventAt = 0
  private readonly queue: FakeReply[] = []
  fallback: FakeReply | ((request: ReceivedRequest) => FakeReply) = { toolInput: { objective: 'fake summary' } }
  /** The prompt cache, simulated: each request's prompt tokens and how many of them were read from cache. */
  readonly cache = new PromptCache()
  /** Whether requests are checked as the Messages API checks them, and go through its cache (a benchmark that times only the gateway turns it off). */
  checks = true
  /**
   * Whether the model behind it has the API's context management (`context_management`, and the beta that
   * names it): one without it refuses the field, as a model or endpoint without it does.
   */
  contextManagement = false
  /**
   * Whether the model checks each thinking block sent back against its prefix (preserved-thinking.ts): the
   * documented models by default. A request to one is refused where a block's prefix changed (or its
   * invalid blocks dropped where it asks), and its answers begin with a thinking block bound to their prefix
   * where the request asks for thinking.
   */
  preservedThinking: (model: string) => boolean = (model) => (PRESERVED_THINKING_MODELS as readonly string[]).includes(model)
  /** Thinking blocks dropped by the prefix check where a request asked for that (drop_block). */
  thinkingDropped = 0
  /** Requests refused as the Messages API refuses them (messagesApiRefusal), with the reason. */
  readonly refused: { path: string; reason: string }[] = []
  /** GETs of the model list, as they came. */
  readonly gets: { path: string; headers: import('node:http').IncomingHttpHeaders }[] = []
  private server: Server | undefined
  private readonly sockets = new Set<import('node:net').Socket>()
  url = ''

  reply(...replies: FakeReply[]): this {
    this.queue.push(...replies)
    return this
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        if (req.method === 'GET' && req.url?.startsWith('/v1/models')) {
          this.gets.push({ path: req.url, headers: req.headers })
          res.writeHead(200, { 'content-type': 'application/json' })
          const model = { type: 'model', id: 'claude-test', display_name: 'Claude Test', created_at: '2025-01-01T00:00:00Z' }
          return void res.end(JSON.stringify({ data: [model], has_more: false, first_id: model.id, last_id: model.id }))
        }
        const raw = Buffer.concat(chunks).toString('utf8')
        const received: ReceivedRequest = {
          headers: req.headers,
          body: JSON.parse(raw) as ReceivedRequest['body'],
          raw,
          path: req.url ?? '',
          at: performance.now()
        }
        this.requests.push(received)
        // What the real API would refuse is refused here too, before any reply is taken from the queue.
        const checked = this.checks && this.preservedThinking(String(received.body.model)) ? checkThinkingPrefix(received.body) : undefined
        this.thinkingDropped += checked?.dropped ?? 0
        const refusal = this.checks
          ? (messagesApiRefusal(received.body) ?? (this.contextManagement ? undefined : contextManagementRefusal(received.body)) ?? checked?.refusal)
          : undefined
        if (refusal !== undefined) {
          this.refused.push({ path: received.path, reason: refusal })
          res.writeHead(400, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: refusal } }))
          return
        }
        const cached =
          this.checks && received.path.startsWith('/v1/messages') && !received.path.includes('count_tokens') ? this.cache.take(received.body) : undefined
        if (cached) received.cache = cached
        const scripted = this.queue.shift() ?? (typeof this.fallback === 'function' ? this.fallback(received) : this.fallback)
        // a model with preserved thinking thinks first where asked to, bound to the answer's prefix
        const thinks = checked !== undefined && thinkingOn(received.body) && (scripted.status ?? 200) === 200
        const next: FakeReply = thinks
          ? { ...scripted, content: [producedThinking(received.body), ...(message(received.body.model, scripted) as StreamedMessage).content] }
          : scripted
        res.once('close', () => {
          if (!res.writableFinished) this.aborted++
        })
        const send = (): void => {
          if (res.destroyed) return
          const status = next.status ?? 200
          if (status === 200 && received.path.endsWith('/count_tokens')) {
            res.writeHead(200, { 'content-type': 'application/json', ...next.headers })
            res.end(JSON.stringify({ input_tokens: Math.ceil(raw.length / 4) }))
            return
          }
          if (status === 200 && received.body.stream === true) {
            void this.stream(res, events(message(received.body.model, next, cached) as StreamedMessage), next)
            return
          }
          const body =
            status === 200
              ? message(received.body.model, next, cached)
              : { type: 'error', error: { type: next.errorType ?? 'api_error', message: `fake ${status}` } }
          // an error the SDK retries is retried at once, unless the reply names its own wait: tests do not wait out the SDK's back-off
          res.writeHead(status, { 'content-type': 'application/json', ...(status === 200 ? {} : retryHeaders(next.headers)), ...next.headers })
          res.end(JSON.stringify(body))
        }
        const wait = (): void => {
          if (next.delayMs) setTimeout(send, next.delayMs)
          else send()
        }
        if (next.after) void next.after.finally(wait)
        else wait()
      })
    })
    this.server.on('connection', (s) => {
      this.sockets.add(s)
      s.on('close', () => this.sockets.delete(s))
    })
    this.server.listen(0, '127.0.0.1')
    await once(this.server, 'listening')
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
    return this
  }

  /** Sends a message as server-sent events, one event at a time, cut off where the reply says. */
  private async stream(res: import('node:http').ServerResponse, all: string[], reply: FakeReply): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': 'req_fake_stream', ...reply.headers })
    for (let i = 0; i < all.length; i++) {
      if (res.destroyed) return
      if (reply.breakAfterEvents !== undefined && i >= reply.breakAfterEvents) {
        const part = reply.breakInsideEventAt === undefined ? '' : (all[i] ?? '').slice(0, reply.breakInsideEventAt)
        if (part) await new Promise<void>((r) => res.write(part, () => r()))
        await new Promise((r) => setTimeout(r, 20))
        res.socket?.destroy()
        return
      }
      res.write(all[i])
      this.lastEventAt = performance.now()
      if (reply.eventDelayMs) await new Promise((r) => setTimeout(r, reply.eventDelayMs))
    }
    res.end()
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((res) => this.server?.close(() => res()) ?? res())
  }
}

let counter = 0
/**
 * The answer's usage: the prompt as the simulated cache billed it (uncached input, cache writes and reads,
 * as the API reports them) where the request went through it, and the output's tokens by its characters.
 */
function message(model: string, reply: FakeReply, cached?: CacheUse): unknown {
  counter++
  const content =
    reply.content ??
    (reply.text !== undefined
      ? [{ type: 'text', text: reply.text }]
      : [{ type: 'tool_use', id: `toolu_fake_${counter}`, name: 'record_summary', input: reply.toolInput ?? {} }])
  return {
    id: `msg_fake_${counter}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: reply.stopReason ?? (content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn'),
    stop_sequence: null,
    usage: cached
      ? {
          input_tokens: cached.tokens - cached.read - cached.written,
          cache_creation_input_tokens: cached.written,
          cache_read_input_tokens: cached.read,
          output_tokens: Math.max(1, Math.ceil(JSON.stringify(content).length / 4))
        }
      : { input_tokens: 1_000 + counter, output_tokens: 100 + counter }
  }
}

interface ThinkingBlock {
  type: 'thinking'
  thinking: string
  signature: string
}
type ContentBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown } | ThinkingBlock

interface StreamedMessage {
  id: string
  model: string
  content: ContentBlock[]
  stop_reason: string
  usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens?: number; cache_read_input_tokens?: number }
}

/** A message as the Messages API streams it: message_start, each block in deltas, message_delta, message_stop. */
function events(m: StreamedMessage): string[] {
  const sse = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...(data as object) })}\n\n`
  const out = [sse('message_start', { message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 1 } } }), sse('ping', {})]
  m.content.forEach((block, index) => {
    if (block.type === 'text') {
      out.push(sse('content_block_start', { index, content_block: { type: 'text', text: '' } }))
      for (const piece of block.text.match(/.{1,8}/gs) ?? []) out.push(sse('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }))
    } else if (block.type === 'thinking') {
      out.push(sse('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } }))
      if (block.thinking) out.push(sse('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: block.thinking } }))
      out.push(sse('content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } }))
    } else {
      out.push(sse('content_block_start', { index, content_block: { ...block, input: {} } }))
      out.push(sse('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } }))
    }
    out.push(sse('content_block_stop', { index }))
  })
  out.push(sse('message_delta', { delta: { stop_reason: m.stop_reason, stop_sequence: null }, usage: { output_tokens: m.usage.output_tokens } }))
  out.push(sse('message_stop', {}))
  return out
}

/** The text of a received request's messages, for looking things up in it. */
export function requestText(r: ReceivedRequest): string {
  return JSON.stringify(r.body.messages)
}
