import { type Server, createServer } from 'node:http'

/**
 * A local stand-in for Gemini's API on loopback (`/v1beta/models/{model}:generateContent`,
 * `:streamGenerateContent?alt=sse`, `:countTokens`, `/v1beta/models`), as Google's SDK and Gemini CLI call it.
 * It refuses what the API refuses, in its error shape: a content with no parts or an empty part, a role
 * other than user and model, a history that does not open with the user, a function response whose call
 * the model content before it did not make (by id, or by name and order), a call of the model's that the
 * content after it leaves unanswered, and, for a model that requires
 * them (`requireSignatures`), a function call of the model's without its thought signature.
 * It caches as Gemini's implicit caching does (models 2.5 and newer): a request whose prompt begins with the
 * same bytes as a recent one's (the system instruction, tools and settings, then whole contents), over the
 * model's least count (`implicitCacheMin`), reads that prefix from the cache (`cachedContentTokenCount`).
 */
export interface GeminiRequest {
  path: string
  headers: import('node:http').IncomingHttpHeaders
  raw: string
  body: { contents?: { role?: string; parts: Record<string, unknown>[] }[]; systemInstruction?: unknown; [k: string]: unknown }
  /** Its prompt's tokens (as counted here), and those read from the implicit cache. */
  tokens?: number
  cached?: number
}

type Content = { role?: string; parts?: unknown }

/** What Gemini's API refuses in `contents`, as its answers say it. */
export function geminiRefusal(body: unknown, requireSignatures: boolean): string | undefined {
  const contents = (body as { contents?: unknown } | null)?.contents
  if (!Array.isArray(contents) || contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified'
  let open: string[] = []
  for (const [i, raw] of contents.entries()) {
    const c = raw as Content
    const role = c.role ?? 'user'
    if (role !== 'user' && role !== 'model') return `* GenerateContentRequest.contents[${i}].role: Please use a valid role: user, model.`
    if (i === 0 && role !== 'user') return 'Please ensure that multiturn requests alternate between user and model, starting with the user.'
    if (!Array.isArray(c.parts) || c.parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`
    const parts = c.parts as Record<string, unknown>[]
    for (const [p, part] of parts.entries()) {
      if (typeof part !== 'object' || part === null || Object.keys(part).filter((k) => k !== 'thoughtSignature' && k !== 'thought').length === 0)
        return `* GenerateContentRequest.contents[${i}].parts[${p}].data: required oneof field 'data' must have one initialized field`
    }
    const calls = parts.filter((p) => p.functionCall)
    if (role === 'model') {
      if (requireSignatures && calls.length > 0 && calls[0]!.thoughtSignature === undefined)
        return `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${String((calls[0]!.functionCall as { name?: unknown }).name)}\` , position ${i + 1}.`
      const seen = new Map<string, number>()
      open = calls.map((p) => {
        const f = p.functionCall as { id?: unknown; name?: unknown }
        const k = seen.get(String(f.name)) ?? 0
        seen.set(String(f.name), k + 1)
        return typeof f.id === 'string' ? f.id : `${String(f.name)}#${k}`
      })
      continue
    }
    const seen = new Map<string, number>()
    for (const p of parts.filter((q) => q.functionResponse)) {
      const f = p.functionResponse as { id?: unknown; name?: unknown }
      const k = seen.get(String(f.name)) ?? 0
      seen.set(String(f.name), k + 1)
      const id = typeof f.id === 'string' ? f.id : `${String(f.name)}#${k}`
      if (!open.includes(id)) return `Please ensure that function response turn comes immediately after a function call turn. (contents[${i}])`
      open = open.filter((o) => o !== id)
    }
    if (open.length > 0)
      return `Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. (contents[${i}])`
    open = []
  }
  return undefined
}

/** A value of a JSON schema's shape (Gemini's OBJECT, STRING… or JSON Schema's object, string…), for a JSON-mode answer. */
function fromSchema(schema: unknown): unknown {
  const s = (schema ?? {}) as { type?: string; properties?: Record<string, unknown>; items?: unknown; enum?: unknown[] }
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0]
  switch ((s.type ?? 'object').toLowerCase()) {
    case 'string':
      return 'fake'
    case 'integer':
    case 'number':
      // a score or a confidence of nothing: no loop, no concern (Gemini CLI's own checks ask for these)
      return 0
    case 'boolean':
      return false
    case 'array':
      return []
    default:
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, fromSchema(v)]))
  }
}

export class FakeGemini {
  readonly requests: GeminiRequest[] = []
  readonly refused: string[] = []
  requireSignatures = false
  /** The key it takes (x-goog-api-key); any where undefined. */
  key: string | undefined
  reply = 'ok'
  /** The model's parts for a request of the agent's own conversation (a scripted agent); `reply` as text where undefined. */
  script: ((body: GeminiRequest['body']) => Record<string, unknown>[]) | undefined
  /** How long an answer takes (a model's turn). */
  delayMs = 0
  /** How long a summary call's answer takes, or 'never' (a model that never answers: the call waits until its client gives up). */
  summaryDelayMs: number | 'never' = 0
  /**
   * The answers to summary calls (a request that offers `record_summary`), taken in turn, the last kept:
   * the call's arguments, a text instead of a call, or an HTTP status.
   */
  summaries: ({ args: Record<string, unknown> } | { text: string } | { status: number })[] = [{ args: { objective: 'fake summary' } }]
  /** The answers to summaries asked in the conversation itself (its last content holds `<compaction-request>`), taken in turn, the last kept: a text, or an HTTP status. */
  conversationSummaries: (string | { status: number })[] = [JSON.stringify({ objective: 'fake summary (the conversation model)' })]
  /** The least prompt, in tokens, whose prefix implicit caching keeps (Gemini 3 models: 4,096). */
  implicitCacheMin = 4_096
  /** The prompts seen, by model and key: each a list of the byte runs a prefix is matched in. */
  private readonly prompts = new Map<string, string[][]>()
  private server: Server | undefined
  url = ''

  /**
   * The tokens of this prompt's longest prefix that a recent prompt of the same model and key began with (whole
   * runs: the settings, then each content), where that prefix reaches `implicitCacheMin`; the prompt is kept.
   */
  private implicitCache(key: string, body: GeminiRequest['body']): number {
    const { contents, ...settings } = body
    const runs = [JSON.stringify({ ...settings, generationConfig: undefined }), ...(contents ?? []).map((c) => JSON.stringify(c))]
    const seen = this.prompts.get(key) ?? []
    let best = 0
    for (const prior of seen) {
      let chars = 0
      for (let i = 0; i < Math.min(prior.length, runs.length) && prior[i] === runs[i]; i++) chars += runs[i]!.length
      best = Math.max(best, chars)
    }
    seen.push(runs)
    this.prompts.set(key, seen.slice(-32))
    const tokens = Math.ceil(best / 4)
    return tokens >= this.implicitCacheMin ? tokens : 0
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const json = (status: number, body: unknown): void => {
          res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' })
          res.end(JSON.stringify(body))
        }
        const error = (code: number, status: string, message: string): void => json(code, { error: { code, message, status } })
        if (this.key !== undefined && req.headers['x-goog-api-key'] !== this.key)
          return error(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.')
        const url = new URL(req.url ?? '/', 'http://localhost')
        if (req.method === 'GET' && url.pathname.startsWith('/v1beta/models')) {
          const model = { name: 'models/gemini-test', displayName: 'Gemini Test', supportedGenerationMethods: ['generateContent', 'countTokens'] }
          return url.pathname === '/v1beta/models' ? json(200, { models: [model] }) : json(200, model)
        }
        const m = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/.exec(url.pathname)
        if (req.method !== 'POST' || !m) return error(404, 'NOT_FOUND', `no route ${req.method} ${url.pathname}`)
        const raw = Buffer.concat(chunks).toString('utf8')
        const body = JSON.parse(raw) as GeminiRequest['body']
        this.requests.push({ path: `${url.pathname}${url.search}`, headers: req.headers, raw, body })
        const refusal = geminiRefusal(body, this.requireSignatures)
        if (refusal) {
          this.refused.push(refusal)
          return error(400, 'INVALID_ARGUMENT', refusal)
        }
        const promptTokenCount = Math.ceil(raw.length / 4)
        if (m[2] === 'countTokens') return json(200, { totalTokens: promptTokenCount })
        const cached = this.implicitCache(`${m[1]}\u0000${String(req.headers['x-goog-api-key'])}`, body)
        Object.assign(this.requests.at(-1)!, { tokens: promptTokenCount, cached })
        const usage = (out: number): Record<string, number> => ({
          promptTokenCount,
          ...(cached > 0 ? { cachedContentTokenCount: cached } : {}),
          candidatesTokenCount: out,
          totalTokenCount: promptTokenCount + out
        })
        if (JSON.stringify(body.contents?.at(-1) ?? null).includes('<compaction-request>')) {
          const next = (this.conversationSummaries.length > 1 ? this.conversationSummaries.shift() : this.conversationSummaries[0]) as
            string | { status: number }
          if (typeof next !== 'string')
            return error(next.status, next.status === 429 ? 'RESOURCE_EXHAUSTED' : next.status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT', `fake ${next.status}`)
          return json(200, {
            candidates: [{ content: { role: 'model', parts: [{ text: next }] }, finishReason: 'STOP', index: 0 }],
            usageMetadata: usage(60),
            modelVersion: m[1]
          })
        }
        const offers = JSON.stringify(body.tools ?? []).includes('"record_summary"')
        if (offers) {
          const answerSummary = (): void => {
            if (res.destroyed) return
            const next = (this.summaries.length > 1 ? this.summaries.shift() : this.summaries[0]) as FakeGemini['summaries'][number]
            if ('status' in next)
              return error(
                next.status,
                next.status === 429 ? 'RESOURCE_EXHAUSTED' : next.status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT',
                `fake ${next.status}`
              )
            const parts =
              'args' in next ? [{ functionCall: { name: 'record_summary', args: next.args }, thoughtSignature: 'c3VtbWFyeQ==' }] : [{ text: next.text }]
            json(200, {
              candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
              usageMetadata: usage(40),
              modelVersion: m[1]
            })
          }
          // a model that never answers: the request stays open until its client gives up
          if (this.summaryDelayMs === 'never') return
          if (this.summaryDelayMs > 0) return void setTimeout(answerSummary, this.summaryDelayMs)
          return answerSummary()
        }
        const answer = (parts: Record<string, unknown>[], last: boolean) => ({
          candidates: [{ content: { role: 'model', parts }, ...(last ? { finishReason: 'STOP' } : {}), index: 0 }],
          usageMetadata: usage(2),
          modelVersion: m[1]
        })
        // a request for JSON (a client's own routing or checks) gets an object of its schema
        const config = body.generationConfig as { responseMimeType?: string; responseJsonSchema?: unknown; responseSchema?: unknown } | undefined
        const jsonAsked = config?.responseMimeType === 'application/json'
        const parts = jsonAsked
          ? [{ text: JSON.stringify(fromSchema(config?.responseJsonSchema ?? config?.responseSchema)) }]
          : (this.script?.(body) ?? [{ text: this.reply }])
        const send = (): void => {
          if (res.destroyed) return
          if (m[2] === 'generateContent') return json(200, answer(parts, true))
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          const texts =
            parts.length === 1 && typeof parts[0]!.text === 'string'
              ? (parts[0]!.text as string).split(' ').map((w, k) => [{ text: k === 0 ? w : ` ${w}` }])
              : [parts]
          texts.forEach((p, k) => res.write(`data: ${JSON.stringify(answer(p, k === texts.length - 1))}\r\n\r\n`))
          res.end()
        }
        if (this.delayMs > 0 && !jsonAsked) setTimeout(send, this.delayMs)
        else send()
      })
    })
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve))
    const address = this.server.address() as import('node:net').AddressInfo
    this.url = `http://127.0.0.1:${address.port}`
    return this
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections()
    await new Promise<void>((resolve) => this.server?.close(() => resolve()))
  }
}
