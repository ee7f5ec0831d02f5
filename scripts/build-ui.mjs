// The web page's build: src/ui bundled by esbuild (with uPlot, its one package) into dist/ui, which the
// server serves at /ui/. Everything the page loads comes from the gateway.
import { copyFileSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = join(root, 'dist', 'ui')
mkdirSync(out, { recursive: true })
await build({
  entryPoints: { app: join(root, 'src', 'ui', 'app.ts') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2022',
  outdir: out,
  legalComments: 'none',
  logLevel: 'warning'
})
copyFileSync(join(root, 'src', 'ui', 'index.html'), join(out, 'index.html'))
