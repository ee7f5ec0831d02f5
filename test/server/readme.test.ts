import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigSchema } from '../../src/server/config.js'
import { ROOT } from '../helpers/process.js'

describe('README and docs/', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => ({ name: f, text: readFileSync(join(ROOT, 'docs', f), 'utf8') }))

  it('opens with the two commands for a fresh machine', () => {
    const head = readme.split('\n').slice(0, 10).join('\n')
    expect(head).toContain('npm ci && npm start')
    expect(head).toContain('npm ci && npm test')
  })

  it('holds JSON examples that parse as they are pasted', () => {
    const blocks = [readme, ...docs.map((d) => d.text)].flatMap((text) => [...text.matchAll(/^```json\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? ''))
    expect(blocks.length).toBeGreaterThan(0)
    for (const block of blocks) expect(() => JSON.parse(block), block.slice(0, 80)).not.toThrow()
  })

  it('documents every setting in the table of docs/configuration.md', () => {
    const table = docs.find((d) => d.name === 'configuration.md')?.text ?? ''
    const rows = new Set([...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]))
    for (const key of Object.keys(ConfigSchema.properties)) expect(rows.has(key), key).toBe(true)
  })
})

describe('docs/', () => {
  it('links every document from the README, and every relative link resolves', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    for (const f of readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md'))) expect(readme, f).toContain(`](docs/${f})`)
    for (const [file, base] of [['README.md', ROOT], ...readdirSync(join(ROOT, 'docs')).map((f) => [join('docs', f), join(ROOT, 'docs')])] as [
      string,
      string
    ][]) {
      const text = readFileSync(join(ROOT, file), 'utf8')
      for (const m of text.matchAll(/\]\(((?:\.\.\/|docs\/)[^)#]+)\)/g)) expect(existsSync(join(base, m[1]!)), `${file}: ${m[1]}`).toBe(true)
    }
  })
})
