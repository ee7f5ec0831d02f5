#!/usr/bin/env node
/**
 * compaction-gateway: `serve` starts the service; `compact FILE` sends a history to one and shows what
 * came back. A thin client, and a reading of how to call the service.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { serve } from '../server/serve.js'
import { type CompactResponseView, formatReport } from './report.js'
import { startSpinner } from './spinner.js'

export const EXIT_USAGE = 2
export const EXIT_UNREACHABLE = 3
export const EXIT_SERVICE_ERROR = 4
export const DEFAULT_URL = 'http://127.0.0.1:8080'

const USAGE = `usage:
  compaction-gateway serve                 start the service (settings from the environment; see README)
  compaction-gateway compact FILE [options]
                                           compact the history in FILE (- for stdin): a JSON object
                                           with "messages" and optionally "system" and "tools"
options for compact:
  --url URL             the service (default $COMPACTION_GATEWAY_URL or ${DEFAULT_URL})
  --key KEY             API key (default $COMPACTION_GATEWAY_KEY)
  --mode auto|manual    default manual: compact now, as /compact does
  --budget N|off        budget_tokens
  --keep-tokens N       keep_tokens
  --instructions TEXT   the focus of this compaction
  --session ID          session_id, for the service's records
  --out FILE            write the compacted history as a request body, ready to send on
  --json                print the service's raw response
  -h, --help            this text`

class UsageError extends Error {}

function fail(message: string, code: number): never {
  process.stderr.write(`compaction-gateway: ${message}\n`)
  process.exit(code)
}

function positiveInt(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value)) throw new UsageError(`--${name} takes a whole number, not ${JSON.stringify(value)}`)
  return Number(value)
}

async function compact(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      key: { type: 'string' },
      mode: { type: 'string', default: 'manual' },
      budget: { type: 'string' },
      'keep-tokens': { type: 'string' },
      instructions: { type: 'string' },
      session: { type: 'string' },
      out: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false }
    }
  })
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  if (positionals.length !== 1) throw new UsageError('compact takes one FILE (or - for stdin)')
  if (values.mode !== 'auto' && values.mode !== 'manual') throw new UsageError('--mode is auto or manual')
  const file = positionals[0]!
  let input: { messages?: unknown; system?: unknown; tools?: unknown }
  try {
    input = JSON.parse(readFileSync(file === '-' ? 0 : file, 'utf8')) as typeof input
  } catch (err) {
    throw new UsageError(`cannot read a JSON history from ${file === '-' ? 'stdin' : file}: ${err instanceof Error ? err.message : String(err)}`)
  }
  if (!Array.isArray(input.messages)) throw new UsageError(`${file}: no "messages" array`)

  const budget = values.budget === 'off' ? 'off' : positiveInt('budget', values.budget)
  const body = {
    messages: input.messages,
    ...(input.system !== undefined ? { system: input.system } : {}),
    ...(input.tools !== undefined ? { tools: input.tools } : {}),
    mode: values.mode,
    ...(budget !== undefined ? { budget_tokens: budget } : {}),
    ...(values['keep-tokens'] !== undefined ? { keep_tokens: positiveInt('keep-tokens', values['keep-tokens']) } : {}),
    ...(values.instructions !== undefined ? { instructions: values.instructions } : {}),
    ...(values.session !== undefined ? { session_id: values.session } : {})
  }
  const base = (values.url ?? process.env.COMPACTION_GATEWAY_URL ?? DEFAULT_URL).replace(/\/+$/, '')
  const key = values.key ?? process.env.COMPACTION_GATEWAY_KEY
  const url = `${base}/v1/compact`

  const stop = startSpinner('compacting')
  const started = performance.now()
  let res: Response
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body)
    })
  } catch (err) {
    stop()
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    fail(`cannot reach the service at ${base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`, EXIT_UNREACHABLE)
  }
  const text = await res.text()
  stop()
  const elapsed = performance.now() - started
  let payload: unknown
  try {
    payload = JSON.parse(text)
  } catch {
    fail(`${base} answered ${res.status} with something that is not JSON: ${text.slice(0, 200)}`, EXIT_SERVICE_ERROR)
  }
  if (!res.ok) {
    const e = (payload as { error?: { type?: string; message?: string; path?: string } }).error
    const where = e?.path ? ` (at ${e.path})` : ''
    fail(`the service answered ${res.status} ${e?.type ?? ''}: ${e?.message ?? text.slice(0, 200)}${where}`, EXIT_SERVICE_ERROR)
  }
  const response = payload as CompactResponseView & { messages?: unknown[] }
  if (values.out) {
    const next = { messages: response.messages ?? input.messages, ...(input.system !== undefined ? { system: input.system } : {}), ...(input.tools !== undefined ? { tools: input.tools } : {}) }
    writeFileSync(values.out, `${JSON.stringify(next, null, 2)}\n`)
  }
  process.stdout.write(values.json ? `${JSON.stringify(payload, null, 2)}\n` : `${formatReport(response, elapsed)}\n`)
}

export async function run(argv: string[]): Promise<void> {
  const [command, ...rest] = argv
  try {
    if (command === 'serve') return await serve()
    if (command === 'compact') return await compact(rest)
    if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
      process.stdout.write(`${USAGE}\n`)
      return
    }
    throw new UsageError(`unknown command ${JSON.stringify(command)}`)
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      fail(`${(err as Error).message}\n\n${USAGE}`, EXIT_USAGE)
    }
    throw err
  }
}

run(process.argv.slice(2)).catch((err: unknown) => fail(err instanceof Error ? err.message : String(err), 1))
