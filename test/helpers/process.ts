import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
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

/** Starts the real server (the TypeScript entry point, through tsx) on a free loopback port. */
export async function startServer(env: Record<string, string> = {}, entry = 'src/server/main.ts'): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
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
export function runToExit(env: Record<string, string>, entry = 'src/server/main.ts'): Promise<{ code: number | null; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', COMPACT_DB: tempDb(), ...env } })
    let err = ''
    child.stderr.on('data', (d: Buffer) => (err += d.toString()))
    child.once('exit', (code) => res({ code, stderr: err }))
  })
}
