import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/process.js'

describe('load', () => {
  it('2,000 compactions at concurrency 32 over loopback: no errors, memory steady (npm run load)', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/load.ts', 'test/fixtures/corpus'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LOAD_PG_URL: 'off' }
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.stderr.on('data', (d: Buffer) => (out += d.toString()))
    const code = await new Promise<number | null>((res) => child.once('exit', res))
    expect(out).toMatch(/statuses +\{"200":2000\}/)
    expect(out).toMatch(/errors +0 *\n/)
    console.log(out.trim()) // the figures, for the CI log
    expect(code, out).toBe(0)
  }, 120_000)
})
