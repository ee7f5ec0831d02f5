import { execFileSync } from 'node:child_process'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The build, once before any test file runs: the tests that run the service as `npm start` does (the
 * load run, the built CLI) need dist/, which a clean clone does not have.
 */
export default function setup(): void {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
  execFileSync(process.execPath, [resolve(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' })
  execFileSync(process.execPath, [resolve(root, 'scripts/build-ui.mjs')], { cwd: root, stdio: 'inherit' })
}
