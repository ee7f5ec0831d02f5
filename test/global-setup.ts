import { execFileSync } from 'node:child_process'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The build, once before any test file runs: the tests that run the service as `npm start` does (the
 * load run, the built CLI) need dist/, which a clean clone does not have.
 */
export default function setup(): void {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
  // the Dockerfile's build command, run once here: no test rebuilds dist/ while others read it
  execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' })
}
