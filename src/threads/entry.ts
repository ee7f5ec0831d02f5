/**
 * Where a worker thread's code is, for every kind of thread the service starts (the compaction workers, the
 * SQLite store's threads): built, beside the module that starts it (dist/, as `npm start` runs); run from the
 * sources (tsx: tests, `npx tsx`), the built copy where the build is current (dist/.built, written after a
 * build, newer than every source), else the .ts file itself, loaded through tsx's loader.
 */
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker, type WorkerOptions } from 'node:worker_threads'

export interface ThreadModule {
  url: URL
  /** The .ts file: a thread must register tsx's loader before it imports it. */
  fromSource: boolean
}

/** The module `name` (without extension) beside `from` (an import.meta.url), as a thread loads it. */
export function threadModule(from: string, name: string): ThreadModule {
  const beside = new URL(`./${name}.js`, from)
  if (existsSync(fileURLToPath(beside))) return { url: beside, fromSource: false }
  const built = currentBuild(fileURLToPath(new URL(`./${name}.ts`, from)))
  if (built) return { url: pathToFileURL(built), fromSource: false }
  return { url: new URL(`./${name}.ts`, from), fromSource: true }
}

/** A thread running `name` beside `from`, from its built code or its source. */
export function startThread(from: string, name: string, options: WorkerOptions = {}): Worker {
  const { url, fromSource } = threadModule(from, name)
  if (!fromSource) return new Worker(url, options)
  // (A worker's `--import tsx` is not applied to its own entry on this Node: the thread registers tsx's
  // loader itself, then imports its .ts code.)
  const code = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(url.href)}) })`
  return new Worker(code, { ...options, eval: true })
}

/** Whether each sources folder's build is current: by folder, once a process. */
const fresh = new Map<string, boolean>()

/** The built counterpart of a source file (src/x/y.ts → dist/x/y.js) where the build holds every source as it is now. */
function currentBuild(source: string): string | undefined {
  const marker = `${join('/', 'src', '/')}`
  const at = source.lastIndexOf(marker)
  if (at < 0) return undefined
  const root = source.slice(0, at)
  const built = join(root, 'dist', relative(join(root, 'src'), source)).replace(/\.ts$/, '.js')
  if (!existsSync(built)) return undefined
  let current = fresh.get(root)
  if (current === undefined) {
    const stamp = join(root, 'dist', '.built')
    current = existsSync(stamp) && statSync(stamp).mtimeMs >= newest(join(root, 'src'))
    fresh.set(root, current)
  }
  return current ? built : undefined
}

/** The newest modification time under a folder. */
function newest(path: string): number {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce((n, name) => Math.max(n, newest(join(path, name))), stat.mtimeMs)
}
