import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/process.js'

describe('load', () => {
  // npm run load with half its measured compactions (it keeps 2,000 for its figures): the whole of it was the
  // longest of this project's files. After its warm-up the server's memory is at its working size, so a leak
  // still shows against the bound over the 1,000 (docs/performance.md has the figures).
  it('1,000 compactions at concurrency 32 over loopback, after 1,000 to warm up: no errors, memory steady (npm run load)', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/load.ts', 'test/fixtures/corpus'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LOAD_PG_URL: 'off', LOAD_REQUESTS: '1000' }
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.stderr.on('data', (d: Buffer) => (out += d.toString()))
    const code = await new Promise<number | null>((res) => child.once('exit', res))
    expect(out).toMatch(/statuses +\{"200":1000\}/)
    expect(out).toMatch(/errors +0 *\n/)
    console.log(out.trim()) // the figures, for the CI log
    expect(code, out).toBe(0)
  }, 120_000)
})
