#!/usr/bin/env node
/**
 * compaction-gateway: `serve` starts the service; `compact FILE` sends a history to one and shows what
 * came back. A thin client, and a reading of how to call the service.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline/promises'
import { parseArgs } from 'node:util'
import { formatReport } from './report.js'
import type { ResponseView } from '../service/compact.js'
import { startSpinner } from './spinner.js'
import { at } from '../compaction/at.js'
import { FORMATS } from '../formats/index.js'
import { systemInstructionText } from '../formats/gemini.js'

export const EXIT_USAGE = 2
export const EXIT_UNREACHABLE = 3
export const EXIT_SERVICE_ERROR = 4
export const DEFAULT_URL = 'http://127.0.0.1:8080'

/** Each command's usage line(s). */
const COMMANDS: Record<string, string> = {
  serve: `  compaction-gateway serve                 start the service (settings from the environment: docs/configuration.md)`,
  rewrap: `  compaction-gateway rewrap                wrap every session key of COMPACT_DB under COMPACT_MASTER_KEY (after a
                                           rotation, with the old key as COMPACT_MASTER_KEY_PREVIOUS); safe while
                                           the service runs`,
  compact: `  compaction-gateway compact FILE [options]
                                           compact the history in FILE (- for stdin): a JSON object
                                           with "messages" and optionally "system" and "tools"`,
  recall: `  compaction-gateway recall SESSION QUERY [--limit N] [--kind KIND]...
                                           search what compactions of SESSION removed`,
  recap: `  compaction-gateway recap SESSION         the session's current summary`,
  sessions: `  compaction-gateway sessions [--limit N] [--cursor C]
                                           your sessions, newest activity first`,
  show: `  compaction-gateway show SESSION COMPACTION
                                           one compaction: what it removed, its cold layer, its summary`,
  delete: `  compaction-gateway delete SESSION [--yes]
                                           delete the session: its records, summaries, cold layer and
                                           cached summaries (asks first, unless --yes)`
}

const SERVICE_HELP = `options for every command that calls the service:
  --url URL             the service (default $COMPACTION_GATEWAY_URL, else http://$HOST:$PORT as the
                        service reads them, else ${DEFAULT_URL})
  --key KEY             API key (default $COMPACTION_GATEWAY_KEY)
  --timeout SECONDS     give up (exit 3) when the service has not answered by then (default 300)
  --json                print the service's raw response`

/** Each command's own options, where it has any. */
const OPTIONS: Record<string, string> = {
  compact: `options for compact:
  --mode auto|manual    default manual: compact now, as /compact does
  --budget N|off        budget_tokens
  --keep-tokens N       keep_tokens
  --keep-turns N        keep_turns
  --summarizer KIND     auto, model, anthropic, openai or extractive
  --dry-run             plan and report, summarize nothing
  --instructions TEXT   the focus of this compaction
  --session ID          session_id, for the service's records
  --format FORMAT       anthropic (default), openai-chat, openai-responses or gemini: the history's format
                        (a Responses request body's "input", a Gemini one's "contents" is read as its
                        history), and the answer's
  --out FILE            write the compacted history as a request body, ready to send on`,
  recall: `options for recall:
  --limit N             at most N results (default 10, at most 50)
  --kind KIND           only entries of this kind (ask, answer, command, error, evidence, file); repeatable`,
  sessions: `options for sessions:
  --limit N             at most N sessions (default 20)
  --cursor C            the next page, as the last one said`,
  delete: `options for delete:
  --yes                 delete without asking`
}

const USAGE = `usage:
${Object.values(COMMANDS).join('\n')}
  compaction-gateway --version             the version of this client
  compaction-gateway COMMAND --help        one command's usage and options
${SERVICE_HELP}
${Object.values(OPTIONS).join('\n')}
  -h, --help            this text`

/** One command's usage and its options (serve's settings are the environment's). */
function commandHelp(command: string): string {
  const usage = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined
  if (!usage) return USAGE
  if (command === 'serve') return `usage:\n${usage}\n  (PORT, HOST, COMPACT_DB, COMPACT_API_KEYS, ANTHROPIC_API_KEY…: see docs/configuration.md)`
  if (command === 'rewrap')
    return `usage:\n${usage}\n  (COMPACT_DB, COMPACT_MASTER_KEY or _FILE or _COMMAND, COMPACT_MASTER_KEY_PREVIOUS: see docs/operations.md)`
  return [`usage:\n${usage}`, SERVICE_HELP, Object.hasOwn(OPTIONS, command) ? OPTIONS[command] : undefined].filter((x) => x !== undefined).join('\n')
}

class UsageError extends Error {}

/** A count and its noun, singular for one. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${number(n)} ${n === 1 ? one : many}`
}

function number(n: number): string {
  return n.toLocaleString('en-US')
}

/** A time as the reader's clock reads it, to the second. */
export function localTime(iso: string): string {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  const pad = (v: number): string => String(v).padStart(2, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
}

/** Rows under a header, each column as wide as its widest cell (numbers to the right). */
export function aligned(header: string[], rows: string[][], right: boolean[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (right[i] ? c.padStart(widths[i] ?? 0) : i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

function fail(message: string, code: number): never {
  process.stderr.write(`compaction-gateway: ${message}\n`)
  process.exit(code)
}

function positiveInt(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value)) throw new UsageError(`--${name} takes a whole number, not ${JSON.stringify(value)}`)
  return Number(value)
}

interface Service {
  base: string
  key: string | undefined
  timeoutMs: number
}

/**
 * The service the environment names as the service reads it (HOST and PORT), so that one setting serves
 * both: a service listening on every interface is reached on loopback.
 */
export function serviceUrl(env: NodeJS.ProcessEnv): string {
  if (env.PORT === undefined && env.HOST === undefined) return DEFAULT_URL
  const host = env.HOST === undefined || env.HOST === '0.0.0.0' || env.HOST === '::' ? '127.0.0.1' : env.HOST
  return `http://${host.includes(':') ? `[${host}]` : host}:${env.PORT ?? '8080'}`
}

/** How long the client waits for an answer by default: longer than a model summary may take. */
export const DEFAULT_TIMEOUT_S = 300

function service(values: { url?: string; key?: string; timeout?: string }): Service {
  const timeout = positiveInt('timeout', values.timeout) ?? DEFAULT_TIMEOUT_S
  if (timeout < 1) throw new UsageError('--timeout takes a number of seconds, at least 1')
  return {
    base: (values.url ?? process.env.COMPACTION_GATEWAY_URL ?? serviceUrl(process.env)).replace(/\/+$/, ''),
    key: values.key ?? process.env.COMPACTION_GATEWAY_KEY,
    timeoutMs: timeout * 1_000
  }
}

/** One call to the service: its JSON answer, or the process ends with exit 3 (unreachable) or 4 (an error answer). */
async function callService(svc: Service, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown, onAnswer?: () => void, hint = ''): Promise<unknown> {
  let res: Response
  try {
    res = await fetch(`${svc.base}${path}`, {
      method,
      signal: AbortSignal.timeout(svc.timeoutMs),
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(svc.key ? { authorization: `Bearer ${svc.key}` } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {})
    })
  } catch (err) {
    onAnswer?.()
    if ((err as Error).name === 'TimeoutError') fail(`no answer from ${svc.base} within ${svc.timeoutMs / 1_000} s (--timeout)`, EXIT_UNREACHABLE)
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    fail(`cannot reach the service at ${svc.base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`, EXIT_UNREACHABLE)
  }
  const text = await res.text()
  onAnswer?.()
  let payload: unknown
  try {
    payload = JSON.parse(text)
  } catch {
    fail(`${svc.base} answered ${res.status} with something that is not JSON: ${text.slice(0, 200)}`, EXIT_SERVICE_ERROR)
  }
  if (!res.ok) {
    const e = (payload as { error?: { type?: string; message?: string; path?: string } }).error
    const where = e?.path ? ` (at ${e.path})` : ''
    fail(
      `the service answered ${res.status} ${e?.type ?? ''}: ${e?.message ?? text.slice(0, 200)}${where}${res.status === 400 ? hint : ''}`,
      EXIT_SERVICE_ERROR
    )
  }
  return payload
}

const SERVICE_OPTIONS = {
  url: { type: 'string' },
  key: { type: 'string' },
  timeout: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false }
} as const

async function recall(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...SERVICE_OPTIONS, limit: { type: 'string' }, kind: { type: 'string', multiple: true } }
  })
  if (positionals.length < 2) throw new UsageError('recall takes a SESSION and a QUERY')
  const [session, ...words] = positionals as [string, ...string[]]
  const limit = positiveInt('limit', values.limit)
  const body = { query: words.join(' '), ...(limit !== undefined ? { limit } : {}), ...(values.kind ? { kinds: values.kind } : {}) }
  const payload = (await callService(service(values), 'POST', `/v1/sessions/${encodeURIComponent(session)}/recall`, body)) as {
    results: { kind: string; text: string; compaction_id: string; messages: [number, number]; score: number }[]
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`)
  if (payload.results.length === 0) return void process.stdout.write('no match\n')
  const lines = payload.results.map(
    (r, i) => `${i + 1}. [${r.kind}] messages ${r.messages[0]}–${r.messages[1]} of ${r.compaction_id} (score ${r.score})\n   ${r.text.replace(/\n/g, '\n   ')}`
  )
  process.stdout.write(`${lines.join('\n')}\n`)
}

async function recap(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: SERVICE_OPTIONS })
  if (positionals.length !== 1) throw new UsageError('recap takes one SESSION')
  const payload = (await callService(service(values), 'GET', `/v1/sessions/${encodeURIComponent(at(positionals, 0))}/recap`)) as {
    summary: { text: string }
    compactions: number
    created_at: string
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`)
  process.stdout.write(`${count(payload.compactions, 'compaction')}, the latest at ${localTime(payload.created_at)}\n\n${payload.summary.text}\n`)
}

async function sessions(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...SERVICE_OPTIONS, limit: { type: 'string' }, cursor: { type: 'string' } }
  })
  if (positionals.length !== 0) throw new UsageError('sessions takes no argument')
  const query = new URLSearchParams()
  const limit = positiveInt('limit', values.limit)
  if (limit !== undefined) query.set('limit', String(limit))
  if (values.cursor !== undefined) query.set('cursor', values.cursor)
  const payload = (await callService(service(values), 'GET', `/v1/sessions${query.size > 0 ? `?${query.toString()}` : ''}`)) as {
    sessions: { session_id: string; compactions: number; last_at: string; raw_history_tokens: number; context_after_compaction: number }[]
    next_cursor: string | null
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`)
  if (payload.sessions.length === 0) return void process.stdout.write('no sessions\n')
  const rows = payload.sessions.map((s) => [
    localTime(s.last_at),
    number(s.compactions),
    number(s.raw_history_tokens),
    number(s.context_after_compaction),
    s.session_id
  ])
  process.stdout.write(`${aligned(['last compaction', 'compactions', 'tokens before', 'after', 'session'], rows, [false, true, true, true, false])}\n`)
  if (payload.next_cursor) process.stdout.write(`more: --cursor ${payload.next_cursor}\n`)
}

async function show(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: SERVICE_OPTIONS })
  if (positionals.length !== 2) throw new UsageError('show takes a SESSION and a COMPACTION id')
  const [session, id] = positionals.map(encodeURIComponent)
  const payload = (await callService(service(values), 'GET', `/v1/sessions/${session}/compactions/${id}`)) as {
    compaction: { created_at: string; summary: { text: string }; stats: { raw_history_tokens: number; context_after_compaction: number } }
    removed: { from: number; to: number; messages: number } | null
    cold_layer: Record<string, number>
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`)
  const { compaction: c, removed } = payload
  const kept = Object.entries(payload.cold_layer).map(([kind, n]) => `${n} ${kind}`)
  process.stdout.write(
    [
      `at               ${c.created_at}`,
      `tokens           ${c.stats.raw_history_tokens} → ${c.stats.context_after_compaction}`,
      `removed          ${removed ? `messages ${removed.from}–${removed.to} (${removed.messages})` : 'nothing'}`,
      `cold layer       ${kept.length > 0 ? kept.join(', ') : 'none'}`,
      '',
      c.summary.text,
      ''
    ].join('\n')
  )
}

async function remove(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { ...SERVICE_OPTIONS, yes: { type: 'boolean' } } })
  if (positionals.length !== 1) throw new UsageError('delete takes one SESSION')
  const session = at(positionals, 0)
  if (!values.yes) {
    if (!process.stdin.isTTY) throw new UsageError('delete asks before deleting: pass --yes where no one can answer')
    const rl = createInterface({ input: process.stdin, output: process.stderr })
    const answer = await rl.question(`delete session ${JSON.stringify(session)} and everything kept of it? [y/N] `)
    rl.close()
    if (!/^y(es)?$/i.test(answer.trim())) return void process.stdout.write('nothing deleted\n')
  }
  const payload = (await callService(service(values), 'DELETE', `/v1/sessions/${encodeURIComponent(session)}`)) as {
    deleted: { compactions: number; cold_layer: number; cached: number; conversations: number }
    space_reclaimed: boolean
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`)
  const d = payload.deleted
  if (d.compactions + d.cold_layer + d.cached + d.conversations === 0)
    return void process.stdout.write(`nothing kept of session ${session}: nothing to delete\n`)
  process.stdout.write(
    `deleted session ${session}: ${count(d.compactions, 'compaction')}, ${count(d.cold_layer, 'cold-layer entry', 'cold-layer entries')}, ${count(d.cached, 'cached summary or anchor', 'cached summaries and anchors')}\n`
  )
  if (!payload.space_reclaimed) process.stdout.write('its space was not reclaimed yet (the store was busy): delete again to retry\n')
}

async function compact(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...SERVICE_OPTIONS,
      mode: { type: 'string', default: 'manual' },
      'keep-turns': { type: 'string' },
      summarizer: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      budget: { type: 'string' },
      'keep-tokens': { type: 'string' },
      instructions: { type: 'string' },
      session: { type: 'string' },
      format: { type: 'string' },
      out: { type: 'string' }
    }
  })
  if (positionals.length !== 1) throw new UsageError('compact takes one FILE (or - for stdin)')
  if (values.mode !== 'auto' && values.mode !== 'manual') throw new UsageError('--mode is auto or manual')
  if (values.summarizer !== undefined && !['auto', 'model', 'anthropic', 'openai', 'gemini', 'extractive'].includes(values.summarizer))
    throw new UsageError('--summarizer is auto, model, anthropic, openai, gemini or extractive')
  const file = at(positionals, 0)
  let text: string
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8')
  } catch (err) {
    const code = (err as { code?: string }).code
    fail(code === 'ENOENT' ? `no such file: ${file}` : `cannot read ${file === '-' ? 'stdin' : file}: ${(err as Error).message}`, EXIT_USAGE)
  }
  if (values.format !== undefined && !FORMATS.includes(values.format as (typeof FORMATS)[number])) throw new UsageError(`--format is ${FORMATS.join(', ')}`)
  let input: { messages?: unknown; input?: unknown; contents?: unknown; systemInstruction?: unknown; system?: unknown; tools?: unknown }
  try {
    input = JSON.parse(text) as typeof input
  } catch (err) {
    fail(`${file === '-' ? 'stdin' : file} is not JSON: ${(err as Error).message}`, EXIT_USAGE)
  }
  // a Responses API request body holds its history as `input`
  // ... and a Gemini request body as `contents`, its system prompt as `systemInstruction`
  const field = Array.isArray(input.messages)
    ? 'messages'
    : values.format === 'openai-responses' && Array.isArray(input.input)
      ? 'input'
      : values.format === 'gemini' && Array.isArray(input.contents)
        ? 'contents'
        : 'messages'
  const history = input[field]
  if (!Array.isArray(history)) {
    const other =
      values.format !== undefined
        ? ''
        : Array.isArray(input.input)
          ? ': it has an "input" array, as a Responses request does (--format openai-responses)'
          : Array.isArray(input.contents)
            ? ': it has a "contents" array, as a Gemini request does (--format gemini)'
            : ''
    fail(
      `${file}: no "messages" array${values.format === 'openai-responses' ? ' (nor "input")' : values.format === 'gemini' ? ' (nor "contents")' : other}`,
      EXIT_USAGE
    )
  }
  if (field === 'contents' && input.system === undefined && input.systemInstruction !== undefined) input.system = systemInstructionText(input.systemInstruction)
  // a history sent without --format that reads as another API's: said beside the service's refusal
  const other = values.format === undefined ? otherFormat(history) : undefined
  const hint = other
    ? ` (the history looks like ${other === 'openai-chat' ? 'a Chat Completions' : other === 'gemini' ? "Gemini's" : "a Responses API's"} one: try --format ${other})`
    : ''

  const budget = values.budget === 'off' ? 'off' : positiveInt('budget', values.budget)
  const body = {
    ...(values.format !== undefined ? { format: values.format } : {}),
    messages: history,
    ...(input.system !== undefined ? { system: input.system } : {}),
    ...(input.tools !== undefined ? { tools: input.tools } : {}),
    mode: values.mode,
    ...(budget !== undefined ? { budget_tokens: budget } : {}),
    ...(values['keep-tokens'] !== undefined ? { keep_tokens: positiveInt('keep-tokens', values['keep-tokens']) } : {}),
    ...(values['keep-turns'] !== undefined ? { keep_turns: positiveInt('keep-turns', values['keep-turns']) } : {}),
    ...(values.summarizer !== undefined ? { summarizer: values.summarizer } : {}),
    ...(values['dry-run'] ? { dry_run: true } : {}),
    ...(values.instructions !== undefined ? { instructions: values.instructions } : {}),
    ...(values.session !== undefined ? { session_id: values.session } : {})
  }
  const stop = startSpinner('compacting')
  const started = performance.now()
  const payload = await callService(service(values), 'POST', '/v1/compact', body, stop, hint)
  const elapsed = performance.now() - started
  const response = payload as ResponseView & { messages?: unknown[] }
  if (values.out) {
    const next = {
      [field]: response.messages ?? history,
      ...(input.system !== undefined ? { system: input.system } : {}),
      ...(input.tools !== undefined ? { tools: input.tools } : {})
    }
    writeFileSync(values.out, `${JSON.stringify(next, null, 2)}\n`)
  }
  process.stdout.write(values.json ? `${JSON.stringify(payload, null, 2)}\n` : `${formatReport(response, elapsed)}\n`)
}

/** The OpenAI format a history reads as, where it is not the Messages API's: its roles, calls and item types say. */
function otherFormat(history: unknown[]): 'openai-chat' | 'openai-responses' | 'gemini' | undefined {
  const items = history.filter((m): m is Record<string, unknown> => typeof m === 'object' && m !== null)
  if (items.some((m) => Array.isArray(m.parts) || m.role === 'model')) return 'gemini'
  if (items.some((m) => typeof m.type === 'string' && /^(?:function_call|function_call_output|reasoning|custom_tool_call|local_shell_call)/.test(m.type)))
    return 'openai-responses'
  if (items.some((m) => m.role === 'tool' || m.role === 'system' || m.role === 'developer' || Array.isArray(m.tool_calls))) return 'openai-chat'
  return undefined
}

/** The client's version: the package's. */
export const CLI_VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version

export async function run(argv: string[]): Promise<void> {
  const [command, ...rest] = argv
  try {
    if (command === '--version' || command === '-v' || command === 'version') return void process.stdout.write(`compaction-gateway ${CLI_VERSION}\n`)
    // Help for any command prints its own usage and does nothing else (serve --help starts no server).
    if (rest.includes('--help') || rest.includes('-h'))
      return void process.stdout.write(`${command !== undefined && Object.hasOwn(COMMANDS, command) ? commandHelp(command) : USAGE}\n`)
    if (command === 'serve') {
      if (rest.length > 0) throw new UsageError(`serve takes no arguments (its settings come from the environment); got ${rest.join(' ')}`)
      // the service's modules are loaded only to serve: every other command starts without them
      return await (await import('../server/serve.js')).serve()
    }
    if (command === 'rewrap') {
      if (rest.length > 0) throw new UsageError(`rewrap takes no arguments (its settings come from the environment); got ${rest.join(' ')}`)
      return await (await import('../server/rewrap.js')).rewrap()
    }
    if (command === 'compact') return await compact(rest)
    if (command === 'recall') return await recall(rest)
    if (command === 'recap') return await recap(rest)
    if (command === 'sessions') return await sessions(rest)
    if (command === 'show') return await show(rest)
    if (command === 'delete') return await remove(rest)
    if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
      process.stdout.write(`${USAGE}\n`)
      return
    }
    throw new UsageError(`unknown command ${JSON.stringify(command)}`)
  } catch (err) {
    const code = (err as { code?: string }).code
    if (err instanceof UsageError || code?.startsWith('ERR_PARSE_ARGS')) {
      // (Node's own words for an unknown option leave a quote open: said here in full)
      const unknown = code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'(-[^']*)'/.exec((err as Error).message)?.[1] : undefined
      const message = unknown ? `${command ?? ''} has no option ${unknown}`.trim() : (err as Error).message
      const help = command !== undefined && Object.hasOwn(COMMANDS, command) ? `compaction-gateway ${command} --help` : 'compaction-gateway --help'
      fail(`${message} (${help} for usage)`, EXIT_USAGE)
    }
    throw err
  }
}

run(process.argv.slice(2)).catch((err: unknown) => fail(err instanceof Error ? err.message : String(err), 1))
