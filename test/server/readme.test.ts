import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigSchema } from '../../src/server/config.js'
import { ROOT } from '../helpers/process.js'

describe('README', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')

  it('opens with the two commands for a fresh machine', () => {
    const head = readme.split('\n').slice(0, 10).join('\n')
    expect(head).toContain('npm ci && npm start')
    expect(head).toContain('npm ci && npm test')
  })

  it('holds JSON examples that parse as they are pasted', () => {
    const blocks = [...readme.matchAll(/^```json\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '')
    expect(blocks.length).toBeGreaterThan(0)
    for (const block of blocks) expect(() => JSON.parse(block), block.slice(0, 80)).not.toThrow()
  })

  it('documents every setting in its table', () => {
    const rows = new Set([...readme.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]))
    for (const key of Object.keys(ConfigSchema.properties)) expect(rows.has(key), key).toBe(true)
  })
})
