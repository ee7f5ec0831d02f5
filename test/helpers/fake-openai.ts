import { createHash } from 'node:crypto'
import { retryHeaders } from './fake-anthropic.js'
import { once } from 'node:events'
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

/** What the fake answers to one Chat Completions request. */
export interface FakeOpenAiReply {
  status?: number
  headers?: Record<string, string>
  delayMs?: number
  /** Answered once this settles (never, for a model that never answers). */
  after?: Promise<unknown>
  /** For a 200: the arguments of the record_summary call (an object, sent as JSON text)... */
  toolInput?: unknown
  /** ...or the arguments as they are (text that may not be JSON)... */
  rawArguments?: string
  /** ...or a plain text answer with no call... */
  text?: string
  /** ...or a refusal. */
  refusal?: string
  /** An event stream that breaks off after its first event (for `stream: true`). */
  breakOff?: boolean
  /** For the Responses API: the output items (reasoning, calls, messages) in place of one text message. */
  output?: Record<string, unknown>[]
  /** For Chat Completions: an agent's function calls, in place of the summary's (the arguments as JSON text). */
  toolCalls?: { id: string; name: string; arguments: string }[]
}

export interface OpenAiRequest {
  headers: IncomingHttpHeaders
  path: string
  /** The prompt's tokens (estimated) and those read from the prefix cache, as its usage reports them. */
  cache?: { prompt: number; cached: number }
  /** The body's bytes as they came. */
  raw: Buffer
  body: {
    model: string
    messages: {
      role: string
      content?: unknown
      tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[]
      tool_call_id?: string
    }[]
    tools?: { type: string; function: { name: string; description?: string; parameters?: unknown } }[]
    tool_choice?: unknown
    max_tokens?: number
    [k: string]: unknown
  }
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool'])
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/

/** Whether a JSON text escapes half of a surrogate pair alone (the APIs refuse it). */
function unpairedSurrogate(raw: string): boolean {
  return (
    /\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})/.test(raw) || /(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}/.test(raw)
  )
}

/**
 * What the Chat Completions API refuses with a 400, as its documentation and its answers state: a body
 * that is not JSON (an unpaired surrogate escaped in it is refused too), no model, no messages, an unknown
 * role, an assistant's tool call not answered by a `tool` message right after it, a `tool` message that
 * answers no call, a function without a valid name or an object schema, a forced function not among the
 * tools, max_tokens below 1.
 */
export function chatCompletionsRefusal(raw: string): string | undefined {
  if (unpairedSurrogate(raw)) {
    return 'We could not parse the JSON body of your request: it holds an unpaired surrogate'
  }
  let body: OpenAiRequest['body']
  try {
    body = JSON.parse(raw) as OpenAiRequest['body']
  } catch {
    return 'We could not parse the JSON body of your request.'
  }
  if (typeof body.model !== 'string' || body.model === '') return 'you must provide a model parameter'
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "'messages' must be a non-empty array"
  if (body.max_tokens !== undefined && !(Number.isInteger(body.max_tokens) && body.max_tokens >= 1)) return "Invalid 'max_tokens': integer below minimum value"
  const names = new Set<string>()
  for (const [i, t] of (body.tools ?? []).entries()) {
    if (t.type !== 'function') return `Invalid value for 'tools[${i}].type'`
    if (!FUNCTION_NAME.test(t.function?.name ?? '')) return `Invalid 'tools[${i}].function.name': string does not match pattern`
    const params = t.function.parameters as { type?: string } | undefined
    if (params !== undefined && params.type !== 'object')
      return `Invalid schema for function '${t.function.name}': schema must be a JSON Schema of 'type: "object"'`
    names.add(t.function.name)
  }
  const choice = body.tool_choice as { type?: string; function?: { name?: string } } | string | undefined
  if (typeof choice === 'object' && choice !== null && choice.type === 'function' && !names.has(choice.function?.name ?? '')) {
    return `Invalid value for 'tool_choice': function '${choice.function?.name}' not found in 'tools'`
  }
  let open: string[] = []
  for (const [i, m] of body.messages.entries()) {
    if (!ROLES.has(m.role)) return `Invalid value for 'messages[${i}].role'`
    if (m.role === 'tool') {
      if (!open.includes(m.tool_call_id ?? ''))
        return `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[${i}])`
      open = open.filter((id) => id !== m.tool_call_id)
      continue
    }
    if (open.length > 0)
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(', ')}`
    if (m.role === 'assistant' && m.tool_calls) open = m.tool_calls.map((c) => c.id)
  }
  if (open.length > 0)
    return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(', ')}`
  return undefined
}

/**
 * A local stand-in for an OpenAI-compatible Chat Completions server on loopback: the real `openai` SDK
 * talks to it through its base URL (`${url}/v1`). It refuses what the API refuses (chatCompletionsRefusal);
 * replies come from a queue, then from `fallback`; every request is recorded. It answers /v1/responses too
 * (responsesRefusal) and /v1/responses/compact, and both APIs stream (`stream: true`) as they do.
 */
export class FakeOpenAi {
  readonly requests: OpenAiRequest[] = []
  readonly refused: string[] = []
  /** GETs of the model list, as they came. */
  readonly gets: { path: string; headers: IncomingHttpHeaders }[] = []
  private readonly queue: FakeOpenAiReply[] = []
  /** The reply when the queue is empty: fixed, or chosen by the request (a summary call, or a proxied one). */
  fallback: FakeOpenAiReply | ((request: OpenAiRequest) => FakeOpenAiReply) = { toolInput: { objective: 'fake summary' } }
  private server: Server | undefined
  url = ''
  /** The prompts' prefixes seen, read back as OpenAI's automatic prompt caching reads them. */
  readonly prefixCache = new PrefixCache()
  /**
   * Whether it has OpenAI's own compaction (`/v1/responses/compact`, `context_management`, compaction items
   * in `input`): a server without it answers 404 to the one and refuses the others, as other servers do.
   */
  compaction = true

  reply(...replies: FakeOpenAiReply[]): this {
    this.queue.push(...replies)
    return this
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const bytes = Buffer.concat(chunks)
        const raw = bytes.toString('utf8')
        const json = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
          res.writeHead(status, { 'content-type': 'application/json', ...headers })
          res.end(JSON.stringify(body))
        }
        if (req.method === 'GET' && req.url?.startsWith('/v1/models')) {
          this.gets.push({ path: req.url, headers: req.headers })
          const model = { id: 'gpt-test', object: 'model', created: 1_700_000_000, owned_by: 'fake' }
          if (req.url === '/v1/models') return json(200, { object: 'list', data: [model] })
          return req.url === '/v1/models/gpt-test'
            ? json(200, model)
            : json(404, { error: { message: `The model '${req.url.slice(11)}' does not exist`, type: 'invalid_request_error', code: 'model_not_found' } })
        }
        const api = req.url === '/v1/chat/completions' ? 'chat' : req.url === '/v1/responses' || req.url === '/v1/responses/compact' ? 'responses' : undefined
        if (req.method !== 'POST' || !api) return json(404, { error: { message: `no route ${req.method} ${req.url}`, type: 'invalid_request_error' } })
        if (!this.compaction && req.url === '/v1/responses/compact')
          return json(404, { error: { message: `no route ${req.method} ${req.url}`, type: 'invalid_request_error' } })
        const refusal = (api === 'chat' ? chatCompletionsRefusal(raw) : responsesRefusal(raw)) ?? (this.compaction ? undefined : compactionRefusal(raw))
        if (refusal) {
          this.refused.push(refusal)
          return json(400, { error: { message: refusal, type: 'invalid_request_error', param: null, code: null } })
        }
        const received: OpenAiRequest = { headers: req.headers, path: req.url as string, raw: bytes, body: JSON.parse(raw) as OpenAiRequest['body'] }
        received.cache = this.prefixCache.take(received.body)
        this.requests.push(received)
        const next = this.queue.shift() ?? (typeof this.fallback === 'function' ? this.fallback(received) : this.fallback)
        const send = (): void => {
          const status = next.status ?? 200
          if (status !== 200)
            return json(
              status,
              { error: { message: `fake ${status}`, type: status === 429 ? 'rate_limit_error' : 'server_error' } },
              { ...retryHeaders(next.headers), ...next.headers }
            )
          const model = received.body.model
          if (req.url === '/v1/responses/compact') return json(200, compaction(received.body.input), next.headers)
          if (received.body.stream !== true)
            return json(200, api === 'chat' ? completion(model, next, received.cache) : response(model, next, received.cache), next.headers)
          res.writeHead(200, { 'content-type': 'text/event-stream', ...next.headers })
          const events = api === 'chat' ? chatChunks(model, next, usageAsked(received.body), received.cache) : responseEvents(model, next, received.cache)
          // a stream that breaks off does so once its first event has left
          if (next.breakOff) return void res.write(events[0], () => res.destroy())
          for (const event of events) res.write(event)
          res.end()
        }
        const wait = (): void => {
          if (next.delayMs) setTimeout(send, next.delayMs)
          else send()
        }
        if (next.after) void next.after.finally(wait)
        else wait()
      })
    })
    this.server.listen(0, '127.0.0.1')
    await once(this.server, 'listening')
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
    return this
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections()
    await new Promise<void>((res) => this.server?.close(() => res()) ?? res())
  }
}

let counter = 0

/** Whether a streamed Chat Completions request asks for a last chunk with the usage (`stream_options.include_usage`). */
function usageAsked(body: OpenAiRequest['body']): boolean {
  return (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true
}

/** The function calls of a Chat Completions answer: the agent's, or one record_summary call. */
function chatToolCalls(reply: FakeOpenAiReply): { id: string; type: 'function'; function: { name: string; arguments: string } }[] | undefined {
  if (reply.toolCalls) return reply.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }))
  if (reply.text !== undefined || reply.refusal !== undefined) return undefined
  return [
    {
      id: `call_fake_${counter}`,
      type: 'function',
      function: { name: 'record_summary', arguments: reply.rawArguments ?? JSON.stringify(reply.toolInput ?? {}) }
    }
  ]
}

function completion(model: string, reply: FakeOpenAiReply, cache: OpenAiRequest['cache']): unknown {
  counter++
  const calls = chatToolCalls(reply)
  const call = calls !== undefined
  const message = {
    role: 'assistant',
    content: reply.text ?? null,
    refusal: reply.refusal ?? null,
    ...(calls ? { tool_calls: calls } : {})
  }
  return {
    id: `chatcmpl-fake-${counter}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: call ? 'tool_calls' : 'stop', logprobs: null }],
    usage: chatUsage(cache, 100)
  }
}

/**
 * What the Responses API refuses in `input`, as its answers state: an item that is not an object, a
 * message without a role, an output that answers no earlier call (by call_id), a call that no output
 * answers, a reasoning item that is not followed by the item it belongs to, two calls with one call_id.
 */
export function responsesInputRefusal(input: unknown): string | undefined {
  if (typeof input === 'string') return undefined
  if (!Array.isArray(input)) return "Invalid type for 'input': expected a string or an array"
  const calls = new Set<string>()
  const answered = new Set<string>()
  for (const [i, raw] of input.entries()) {
    if (typeof raw !== 'object' || raw === null) return `Invalid type for 'input[${i}]'`
    const item = raw as { type?: string; role?: string; call_id?: string }
    const type = item.type ?? (item.role ? 'message' : undefined)
    if (type === undefined) return `Missing required parameter: 'input[${i}].type'`
    if (type === 'message' && !item.role) return `Missing required parameter: 'input[${i}].role'`
    if (type === 'reasoning' && i === input.length - 1) return `Item 'input[${i}]' of type 'reasoning' was provided without its required following item.`
    if (typeof item.call_id === 'string') {
      if (type.endsWith('_output')) {
        if (!calls.has(item.call_id)) return `No tool call found for function call output with call_id ${item.call_id}.`
        answered.add(item.call_id)
      } else {
        if (calls.has(item.call_id)) return `Duplicate call_id ${item.call_id}.`
        calls.add(item.call_id)
      }
    }
  }
  const open = [...calls].find((id) => !answered.has(id))
  if (open !== undefined) return `No tool output found for function call ${open}.`
  return undefined
}

/** What a server without OpenAI's compaction refuses: `context_management`, and a `compaction` item in `input`. */
function compactionRefusal(raw: string): string | undefined {
  const body = JSON.parse(raw) as { context_management?: unknown; input?: unknown }
  if (body.context_management !== undefined) return 'Unrecognized request argument supplied: context_management'
  if (Array.isArray(body.input) && body.input.some((i: unknown) => (i as { type?: unknown } | null)?.type === 'compaction'))
    return "Invalid value: 'compaction'. Supported values are: 'message', 'function_call', 'function_call_output', 'reasoning'."
  return undefined
}

/** The text a fake answer says (a plain answer's, or a short default one for the proxies' tests). */
function answerText(reply: FakeOpenAiReply): string {
  return reply.text ?? 'fake answer'
}

/**
 * A compaction as the Responses API answers one (`response.compaction`): the user messages of the input,
 * then one compaction item whose content stands for the rest.
 */
function compaction(input: unknown): Record<string, unknown> {
  counter++
  const items: { type?: string; role?: string; content?: unknown }[] = Array.isArray(input)
    ? (input as { type?: string; role?: string }[])
    : [{ role: 'user', content: String(input ?? '') }]
  const users = items.filter((i) => (i.type ?? 'message') === 'message' && i.role === 'user')
  return {
    id: `resp_compact_fake_${counter}`,
    object: 'response.compaction',
    created_at: Math.floor(Date.now() / 1000),
    output: [...users, { type: 'compaction', id: `cmp_fake_${counter}`, encrypted_content: `gAAAAC${'c'.repeat(40)}${items.length}` }],
    usage: {
      input_tokens: 1_000 + counter,
      output_tokens: 10,
      total_tokens: 1_010 + counter,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 }
    }
  }
}

/**
 * Chat Completions chunks as the API streams them: the role, then the text in two deltas or each function
 * call (its id and name, then its arguments), the finish, the usage where it was asked for, [DONE].
 */
function chatChunks(model: string, reply: FakeOpenAiReply, withUsage: boolean, cache: OpenAiRequest['cache']): string[] {
  counter++
  const id = `chatcmpl-fake-${counter}`
  const created = Math.floor(Date.now() / 1000)
  const data = (fields: Record<string, unknown>): string => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, ...fields })}\n\n`
  const chunk = (delta: unknown, finish: string | null): string => data({ choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] })
  const usage = withUsage ? [data({ choices: [], usage: chatUsage(cache, 10) })] : []
  if (reply.toolCalls) {
    const calls = reply.toolCalls.flatMap((c, index) => [
      chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }, null),
      chunk({ tool_calls: [{ index, function: { arguments: c.arguments } }] }, null)
    ])
    return [chunk({ role: 'assistant', content: null }, null), ...calls, chunk({}, 'tool_calls'), ...usage, 'data: [DONE]\n\n']
  }
  const text = answerText(reply)
  const half = Math.floor(text.length / 2)
  return [
    chunk({ role: 'assistant', content: '' }, null),
    chunk({ content: text.slice(0, half) }, null),
    chunk({ content: text.slice(half) }, null),
    chunk({}, 'stop'),
    ...usage,
    'data: [DONE]\n\n'
  ]
}

/** A Responses API response object with one assistant message. */
function response(model: string, reply: FakeOpenAiReply, cache: OpenAiRequest['cache']): Record<string, unknown> {
  counter++
  const text = answerText(reply)
  return {
    id: `resp_fake_${counter}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    model,
    output: reply.output ?? [
      { type: 'message', id: `msg_fake_${counter}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }
    ],
    usage: responsesUsage(cache, 10)
  }
}

/** The Responses API's events for a response, in its order, each numbered: a message's text as a delta, any other item whole. */
function responseEvents(model: string, reply: FakeOpenAiReply, cache: OpenAiRequest['cache']): string[] {
  const done = response(model, reply, cache)
  const events: Record<string, unknown>[] = [{ type: 'response.created', response: { ...done, status: 'in_progress', output: [] } }]
  for (const [k, item] of (done.output as { type: string; id: string; content?: { text: string }[] }[]).entries()) {
    const at = { output_index: k, item_id: item.id, content_index: 0 }
    if (item.type === 'function_call') {
      // a call's arguments stream as deltas after the item is added without them
      const args = String((item as { arguments?: unknown }).arguments ?? '')
      const call = { output_index: k, item_id: item.id }
      events.push(
        { type: 'response.output_item.added', output_index: k, item: { ...item, status: 'in_progress', arguments: '' } },
        { type: 'response.function_call_arguments.delta', ...call, delta: args },
        { type: 'response.function_call_arguments.done', ...call, arguments: args },
        { type: 'response.output_item.done', output_index: k, item }
      )
      continue
    }
    if (item.type !== 'message') {
      events.push({ type: 'response.output_item.added', output_index: k, item }, { type: 'response.output_item.done', output_index: k, item })
      continue
    }
    const text = item.content?.[0]?.text ?? ''
    const part = { type: 'output_text', text: '', annotations: [] }
    events.push(
      { type: 'response.output_item.added', output_index: k, item: { ...item, status: 'in_progress', content: [] } },
      { type: 'response.content_part.added', ...at, part },
      { type: 'response.output_text.delta', ...at, delta: text },
      { type: 'response.output_text.done', ...at, text },
      { type: 'response.content_part.done', ...at, part: { ...part, text } },
      { type: 'response.output_item.done', output_index: k, item }
    )
  }
  events.push({ type: 'response.completed', response: done })
  return events.map((e, n) => `event: ${e.type as string}\ndata: ${JSON.stringify({ ...e, sequence_number: n })}\n\n`)
}

/**
 * What the Responses API refuses with a 400: a body that is not JSON (or holds an unpaired surrogate), no
 * model, an `input` it refuses (responsesInputRefusal), tools that are not objects with a type, a reasoning
 * item without its encrypted content where nothing is stored (`store: false`).
 */
export function responsesRefusal(raw: string): string | undefined {
  if (unpairedSurrogate(raw)) {
    return 'We could not parse the JSON body of your request: it holds an unpaired surrogate'
  }
  let body: { model?: unknown; input?: unknown; tools?: unknown; store?: unknown }
  try {
    body = JSON.parse(raw) as typeof body
  } catch {
    return 'We could not parse the JSON body of your request.'
  }
  if (typeof body.model !== 'string' || body.model === '') return "Missing required parameter: 'model'."
  if (body.tools !== undefined && (!Array.isArray(body.tools) || body.tools.some((t) => typeof (t as { type?: unknown } | null)?.type !== 'string')))
    return "Invalid type for 'tools'"
  if (body.input === undefined) return undefined
  // with store: false nothing is kept upstream: a reasoning item must bring its encrypted content
  if (body.store === false && Array.isArray(body.input)) {
    const k = body.input.findIndex(
      (i) => (i as { type?: unknown } | null)?.type === 'reasoning' && typeof (i as { encrypted_content?: unknown }).encrypted_content !== 'string'
    )
    if (k >= 0) return `Item 'input[${k}]' of type 'reasoning' was not found: items are not persisted when \`store\` is set to false`
  }
  return responsesInputRefusal(body.input)
}

/** A Chat Completions usage with the prompt's tokens and those read from cache. */
function chatUsage(cache: OpenAiRequest['cache'], output: number): Record<string, unknown> {
  const prompt = cache?.prompt ?? 1_000 + counter
  return { prompt_tokens: prompt, completion_tokens: output, total_tokens: prompt + output, prompt_tokens_details: { cached_tokens: cache?.cached ?? 0 } }
}

/** A Responses usage with the input's tokens and those read from cache. */
function responsesUsage(cache: OpenAiRequest['cache'], output: number): Record<string, unknown> {
  const input = cache?.prompt ?? 1_000 + counter
  return {
    input_tokens: input,
    output_tokens: output,
    total_tokens: input + output,
    input_tokens_details: { cached_tokens: cache?.cached ?? 0 },
    output_tokens_details: { reasoning_tokens: 0 }
  }
}

/** OpenAI's prompts are cached from 1,024 tokens on, in blocks of 128. */
const CACHE_MIN_TOKENS = 1_024
const CACHE_BLOCK_TOKENS = 128

/**
 * OpenAI's automatic prompt caching, as its documentation states it: a prompt's prefix that an earlier
 * prompt began with exactly is read from cache, from 1,024 tokens on, in blocks of 128; nothing marks it.
 * The prompt is read in the order the API renders it (tools, then the instructions, then each message or
 * item), and a prefix matches item by item (a partial item is not credited: the count is the lower bound).
 * Tokens are estimated at four characters each.
 */
export class PrefixCache {
  private readonly seen = new Set<string>()

  take(body: OpenAiRequest['body']): { prompt: number; cached: number } {
    const parts: unknown[] = [
      body.tools ?? [],
      body.instructions ?? null,
      ...((Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : [body.input]) as unknown[])
    ]
    const hash = createHash('sha256')
    let chars = 0
    let cached = 0
    const prefixes: string[] = []
    for (const part of parts) {
      const text = JSON.stringify(part) ?? 'null'
      hash.update(text).update('\u0000')
      chars += text.length
      const h = hash.copy().digest('hex')
      prefixes.push(h)
      if (this.seen.has(h)) cached = Math.ceil(chars / 4)
    }
    for (const h of prefixes) this.seen.add(h)
    const prompt = Math.ceil(chars / 4)
    return { prompt, cached: cached >= CACHE_MIN_TOKENS ? Math.floor(cached / CACHE_BLOCK_TOKENS) * CACHE_BLOCK_TOKENS : 0 }
  }
}
