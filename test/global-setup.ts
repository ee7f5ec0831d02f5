import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
/** Written after a build: dist/ is as new as the sources the build read, or newer. */
const STAMP = join(ROOT, 'dist', '.built')
/** What the build reads. */
const INPUTS = ['src', 'scripts/build.mjs', 'scripts/build-ui.mjs', 'tsconfig.build.json', 'tsconfig.json', 'package-lock.json']

/** The newest modification time under a file or folder. */
function newest(path: string): number {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce((n, name) => Math.max(n, newest(join(path, name))), stat.mtimeMs)
}

/**
 * The build, once before any test file runs, and only when a source changed since the last one: the tests
 * that run the service as `npm start` does (the server and CLI processes, the load run) need dist/, which a
 * clean clone does not have.
 */
function build(): void {
  if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= Math.max(...INPUTS.map((p) => newest(join(ROOT, p))))) return
  // the Dockerfile's build command, run once here: no test rebuilds dist/ while others read it
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' })
  writeFileSync(STAMP, '')
}

/**
 * The build, then one temporary folder for the whole run: the test files' databases, sockets and clients'
 * files are made under it (os.tmpdir() reads TMPDIR, which the test workers inherit), and it is removed
 * when the run ends, whichever test made what, so a run leaves nothing in the machine's temporary folder.
 */
export default function setup(): () => void {
  build()
  const previous = process.env.TMPDIR
  const root = mkdtempSync(join(tmpdir(), 'compaction-tests-'))
  process.env.TMPDIR = root
  return () => {
    if (previous === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = previous
    // a process the run started may still be writing there as it exits: retried, and never the run's failure
    try {
      rmSync(root, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 })
    } catch (err) {
      console.warn(`the run's temporary folder ${root} was not removed: ${String(err)}`)
    }
  }
}
