import { once } from 'node:events'
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

/** What the fake answers to one request. */
export interface FakeReply {
  status?: number
  headers?: Record<string, string>
  /** Milliseconds to wait before answering. */
  delayMs?: number
  /** For a 200: the input of the record_summary tool call... */
  toolInput?: unknown
  /** ...or a plain text answer with no tool call. */
  text?: string
  stopReason?: string
  /** For an error status: the error type in the body. */
  errorType?: string
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
}

/**
 * A local stand-in for the Anthropic Messages API on loopback: the real SDK talks to it through
 * ANTHROPIC_BASE_URL. Replies come from a queue, then from `fallback`; every request is recorded.
 */
export class FakeAnthropic {
  readonly requests: ReceivedRequest[] = []
  /** Requests whose client went away before they were answered (an aborted SDK call). */
  aborted = 0
  private readonly queue: FakeReply[] = []
  fallback: FakeReply | ((request: ReceivedRequest) => FakeReply) = { toolInput: { objective: 'fake summary' } }
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
        const raw = Buffer.concat(chunks).toString('utf8')
        const received: ReceivedRequest = { headers: req.headers, body: JSON.parse(raw) as ReceivedRequest['body'], raw }
        this.requests.push(received)
        const next = this.queue.shift() ?? (typeof this.fallback === 'function' ? this.fallback(received) : this.fallback)
        res.once('close', () => {
          if (!res.writableFinished) this.aborted++
        })
        const send = (): void => {
          if (res.destroyed) return
          const status = next.status ?? 200
          const body =
            status === 200
              ? message(received.body.model, next)
              : { type: 'error', error: { type: next.errorType ?? 'api_error', message: `fake ${status}` } }
          res.writeHead(status, { 'content-type': 'application/json', ...next.headers })
          res.end(JSON.stringify(body))
        }
        if (next.delayMs) setTimeout(send, next.delayMs)
        else send()
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

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((res) => this.server?.close(() => res()) ?? res())
  }
}

let counter = 0
function message(model: string, reply: FakeReply): unknown {
  counter++
  const content =
    reply.text !== undefined
      ? [{ type: 'text', text: reply.text }]
      : [{ type: 'tool_use', id: `toolu_fake_${counter}`, name: 'record_summary', input: reply.toolInput ?? {} }]
  return {
    id: `msg_fake_${counter}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: reply.stopReason ?? (reply.text !== undefined ? 'end_turn' : 'tool_use'),
    stop_sequence: null,
    usage: { input_tokens: 1_000 + counter, output_tokens: 100 + counter }
  }
}

/** The text of a received request's messages, for looking things up in it. */
export function requestText(r: ReceivedRequest): string {
  return JSON.stringify(r.body.messages)
}
