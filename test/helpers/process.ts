import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

export interface ServerProcess {
  child: ChildProcessWithoutNullStreams
  url: string
  stdout: () => string
  stderr: () => string
  exited: Promise<number | null>
}

/** A database file of its own for one test. */
export function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'compaction-gateway-')), 'compaction.db')
}

/**
 * The built entry points (the global setup builds them once): what `npm start` and the `compaction-gateway`
 * command run, and a process of them starts in a fraction of the time tsx takes to compile the sources.
 */
export const SERVER_ENTRY = 'dist/server/main.js'
export const CLI_ENTRY = 'dist/cli/main.js'

/** Node's arguments for an entry point: a built one as it is, a TypeScript one through tsx. */
export function nodeArgs(entry: string, ...args: string[]): string[] {
  return entry.endsWith('.ts') ? ['--import', 'tsx', entry, ...args] : [entry, ...args]
}

/** Starts the real server (the built entry point) on a free loopback port. */
export async function startServer(env: Record<string, string> = {}, entry = SERVER_ENTRY): Promise<ServerProcess> {
  const child = spawn(process.execPath, nodeArgs(entry), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', COMPACT_DB: tempDb(), ...env }
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)))
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`server did not start:\n${out}\n${err}`)), 20_000)
    const check = (): void => {
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        res(m[1]!)
      }
    }
    child.stdout.on('data', check)
    void exited.then(() => {
      clearTimeout(timer)
      rej(new Error(`server exited before listening:\n${out}\n${err}`))
    })
  })
  return { child, url, stdout: () => out, stderr: () => err, exited }
}

/** Runs the entry point to completion (for start-up failures). */
export function runToExit(env: Record<string, string>, entry = SERVER_ENTRY): Promise<{ code: number | null; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, nodeArgs(entry), { cwd: ROOT, env: { PATH: process.env.PATH ?? '', COMPACT_DB: tempDb(), ...env } })
    let err = ''
    child.stderr.on('data', (d: Buffer) => (err += d.toString()))
    child.once('exit', (code) => res({ code, stderr: err }))
  })
}

/** A line of a server process's log, as the tests read the fields they look at. */
export interface LogLine {
  event?: string
  compaction?: string
  source?: string
  summary_id?: string
  prepare_ms?: number
  status?: number
  estimated_tokens?: number
  context_after_compaction?: number
  raw_history_tokens?: number
}

/** The JSON lines a server process has logged so far. */
export function logLines(server: ServerProcess): LogLine[] {
  return server
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine)
}

/**
 * A real client installed into .clients/ by scripts/install-clients.sh: its entry point, or why its tests
 * are skipped (said once, on stderr).
 */
export function installedClient(label: string, folder: string, entry: string): { bin: string; missing: string | undefined } {
  const bin = join(ROOT, '.clients', folder, 'node_modules', entry)
  const missing = existsSync(bin) ? undefined : `${label} is not installed in .clients/ (npm run e2e installs it)`
  if (missing) console.warn(`skipped: ${missing}`)
  return { bin, missing }
}
