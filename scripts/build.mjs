// The service's build: every module of src/ (but the web page's, which build-ui.mjs bundles) transpiled by
// esbuild to dist/, one file a module beside its source map, as `npm start` and the image run them. Types are
// checked apart (`npm run typecheck`, which CI runs before the tests): tsc's emit took seven seconds of every
// fresh test run, esbuild's takes a fraction of one, and the modules are the same (ESM, ES2022, nothing bundled).
import { readdirSync, rmSync } from 'node:fs'
import { join, sep } from 'node:path'
import { build } from 'esbuild'

const root = join(import.meta.dirname, '..')
const src = join(root, 'src')
const entryPoints = readdirSync(src, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts') && !file.startsWith(`ui${sep}`))
  .map((file) => join(src, file))

// a module removed from src/ leaves nothing behind in dist/ (the page's bundle is built after this)
rmSync(join(root, 'dist'), { recursive: true, force: true })
await build({
  entryPoints,
  outdir: join(root, 'dist'),
  outbase: src,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  tsconfig: join(root, 'tsconfig.build.json'),
  logLevel: 'warning'
})
