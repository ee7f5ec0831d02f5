import { readFileSync, readdirSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/process.js'

/**
 * The image keeps only the production dependencies (`npm prune --omit=dev`, as the lockfile marks them), and
 * its CMD runs dist/. A package dist/ imports at load that the lockfile marks for development only is not in
 * the image, and the server dies before it listens: the Gemini SDK, imported by the summarizers, was one.
 * The test that runs the image's CMD (dockerfile.test.ts) runs it with every package installed, so it is
 * checked here, from the built files and the lockfile.
 */
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; dependencies?: Record<string, string> }>
}
/** package.json's dependencies, as the lockfile's root records them. */
const production = lock.packages['']?.dependencies ?? {}

/** The packages a built module imports as it loads (`import … from`, `export … from`, a bare `import '…'`), by name. */
function staticImports(source: string): string[] {
  const specifiers = [...source.matchAll(/^\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm)].map(
    (m) => (m[1] ?? m[2])!
  )
  return specifiers.filter((s) => !s.startsWith('.') && !s.startsWith('node:') && !builtinModules.includes(s)).map((s) => /^(?:@[^/]+\/)?[^/]+/.exec(s)![0])
}

describe('the production dependencies', () => {
  const imports = readdirSync(join(ROOT, 'dist'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.js') && !file.startsWith('ui/'))
    .flatMap((file) => staticImports(readFileSync(join(ROOT, 'dist', file), 'utf8')).map((pkg) => ({ file: `dist/${file}`, pkg })))

  it('hold every package the built service imports as it loads', () => {
    // the built files are read: a type-only import leaves nothing behind, and a dynamic import of a development tool (the OpenAPI generator, tsx) is loaded only where it is installed
    expect(imports.length).toBeGreaterThan(20)
    const missing = imports.filter(({ pkg }) => !(pkg in production) || lock.packages[`node_modules/${pkg}`]?.dev === true)
    expect(missing, 'imported at load but not a production dependency (npm prune --omit=dev removes it from the image)').toEqual([])
  })
})
