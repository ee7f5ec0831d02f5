/** The servers benchmarks measure against: the real gateway as a process, and the bare JSON floor. */
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { type Server, createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const ROOT = resolve(import.meta.dirname, '..')

/**
 * A module of the service as `npm start` runs it: compiled to dist/ by `npm run build` (the bench scripts
 * build first). Run from the sources through tsx instead, the same code took a fifth more CPU per
 * compaction (the transform wraps every inner function to keep its name).
 */
export async function fromBuild<T>(module: string): Promise<T> {
  return (await import(pathToFileURL(built(module)).href)) as T
}

/**
 * A folder of the machine's temporary one for a benchmark's files (a gateway's database, a large body),
 * removed when the benchmark's process exits: a run leaves nothing behind it.
 */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A built file's path, or a clear error when the build has not run. */
function built(module: string): string {
  const file = join(ROOT, 'dist', module)
  if (!existsSync(file)) throw new Error(`${file} is missing: run npm run build first`)
  return file
}

/** The baseline server: single-threaded node:http that parses the body and answers with a quarter of its messages. */
export function bareServer(): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: unknown[] }
      const out = JSON.stringify({ messages: body.messages.slice(body.messages.length - Math.ceil(body.messages.length / 4)) })
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) })
      res.end(out)
    })
  })
}

/** The bare server in a process of its own, as the gateway runs: the load generator then has no share of its thread. */
export async function bareProcess(): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const script = `import('./bench/servers.ts').then(({ bareServer }) => { const s = bareServer().listen(0, '127.0.0.1', () => console.log('port ' + s.address().port)) })`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<string>((res, rej) => {
    child.stdout!.on('data', (d: Buffer) => {
      const m = /port (\d+)/.exec(d.toString())
      if (m) res(m[1]!)
    })
    child.once('exit', () => rej(new Error('the bare server exited')))
  })
  return {
    url: `http://127.0.0.1:${port}/`,
    child,
    stop: async () => {
      child.kill('SIGTERM')
      await new Promise((res) => child.once('exit', res))
    }
  }
}

export interface GatewayProcess {
  child: ChildProcess
  /** The process that reads the gateway's log lines (LOG_SINK), for a bench that pins its processes. */
  logSink: ChildProcess
  /** The service's base URL. */
  url: string
  stop: () => Promise<number | null>
}

/**
 * The gateway's log reader: a process of its own, as a deployment's log collector is, so that reading the
 * lines is no work of the bench's own event loop (whose clients time the requests: a line read there
 * lands in the time of whatever request the client is timing then). It says the gateway's URL once the
 * gateway listens (`url …` on its stdout) and drops every line; should the gateway exit before it
 * listens, what it wrote goes to stderr.
 */
const LOG_SINK = `let seen = '', url = false
process.stdin.on('data', (d) => {
  if (url) return
  seen += d
  const m = /Server listening at (http:[^"]+)"/.exec(seen)
  if (m) { url = true; seen = ''; process.stdout.write('url ' + m[1] + '\\n') }
})
process.stdin.on('end', () => { if (!url) process.stderr.write(seen) })`

/** The gateway as `npm start` runs it (built, see fromBuild), on a free loopback port, with a database of its own; its log lines are read by a process of their own and dropped (LOG_SINK). */
export async function startGateway(env: Record<string, string> = {}, nodeFlags: string[] = []): Promise<GatewayProcess> {
  const logSink = spawn(process.execPath, ['-e', LOG_SINK], { stdio: ['pipe', 'pipe', 'inherit'] })
  const child = spawn(process.execPath, [...nodeFlags, built('server/main.js')], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      COMPACT_RATE_LIMIT_PER_MIN: '1000000',
      COMPACT_DB: join(scratchDir('compaction-bench-'), 'compaction.db'),
      ...env
    },
    stdio: ['ignore', logSink.stdin!, 'inherit']
  })
  // the sink's end of the pipe is the gateway's alone now: it reads to the end when the gateway exits
  logSink.stdin!.destroy()
  const sinkExited = new Promise<void>((res) => logSink.once('exit', () => res()))
  const url = await new Promise<string>((res, rej) => {
    let out = ''
    const early = (): void => {
      child.kill('SIGKILL')
      rej(new Error("the gateway's log reader exited before the gateway listened"))
    }
    logSink.once('exit', early)
    logSink.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /^url (\S+)\n/.exec(out)
      if (!m) return
      logSink.off('exit', early)
      res(m[1]!)
    })
    child.once('exit', (code) => rej(new Error(`the gateway exited (${code}) before it listened: its log is above`)))
  })
  return {
    child,
    logSink,
    url,
    stop: async () => {
      child.kill('SIGTERM')
      const code = await new Promise<number | null>((res) => child.once('exit', res))
      await sinkExited
      return code
    }
  }
}

/** Resident memory of a process now, and the most it has had (VmHWM), in MiB. */
export function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM') }
}

/** The worst wait of a probe (/healthz unless told), polled back to back, while `work` runs. */
export async function worstStall(base: string, work: Promise<unknown>, paths = ['/healthz']): Promise<number> {
  let done = false
  void work.finally(() => (done = true))
  let worst = 0
  for (let i = 0; !done; i++) {
    const t0 = performance.now()
    await (await fetch(`${base}${paths[i % paths.length]}`)).arrayBuffer()
    worst = Math.max(worst, performance.now() - t0)
    await new Promise((r) => setTimeout(r, 2))
  }
  return worst
}
