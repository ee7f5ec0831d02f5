import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

/**
 * The layers below the server and storage keep a test file beside each module, by the same name under test/: a
 * module's tests are where a reader looks for them. Barrels (only `export * from`) and modules that
 * export types alone have nothing to run.
 */
const MIRRORED = ['compaction', 'contract', 'formats', 'memory', 'prompts', 'proxy', 'secrets', 'service', 'summarizer', 'telemetry', 'workers']

function runtimeModule(source: string): boolean {
  const exports = source.split('\n').filter((l) => l.startsWith('export '))
  if (exports.length > 0 && exports.every((l) => l.startsWith('export * from'))) return false
  return exports.some((l) => /^export (?:async )?(?:function|const|class|let|enum)\b/.test(l))
}

describe('layout', () => {
  it.each(MIRRORED)('every module of src/%s that runs has its own test file', (folder) => {
    const missing = readdirSync(join('src', folder), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && runtimeModule(readFileSync(join('src', folder, f), 'utf8')))
      .map((f) => join('test', folder, f.replace(/\.ts$/, '.test.ts')))
      .filter((t) => !existsSync(t))
    expect(missing).toEqual([])
  })

  it('knows a barrel and a types-only module from a module that runs', () => {
    expect(runtimeModule("export * from './a.js'\nexport * from './b.js'\n")).toBe(false)
    expect(runtimeModule('export interface A {}\nexport type B = A\n')).toBe(false)
    expect(runtimeModule('export interface A {}\nexport function f() {}\n')).toBe(true)
    expect(runtimeModule('export const X = 1\n')).toBe(true)
  })
})
