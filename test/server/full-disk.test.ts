import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { assistant, call, result, results, user } from '../helpers/history.js'
import { until } from '../helpers/wait.js'

/** A small tmpfs of the test's own (mounting needs root, as CI runs); undefined, with why, where it cannot be had. */
function smallDisk(): { dir: string; unmount: () => void } | string {
  const dir = mkdtempSync(join(tmpdir(), 'cg-full-disk-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { stdio: 'ignore' })
    return { dir, unmount: () => execFileSync('umount', ['-l', dir], { stdio: 'ignore' }) }
  } catch {
    return 'a tmpfs cannot be mounted here (root is needed)'
  }
}

const disk = smallDisk()
const missing = typeof disk === 'string' ? disk : undefined

describe.skipIf(missing !== undefined)(`a full disk under the SQLite store${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const { dir, unmount } = disk as Exclude<typeof disk, string>
  let app: App | undefined
  afterAll(async () => {
    await app?.close()
    unmount()
  })

  it('fails no compaction: each is answered and flagged where its record could not be kept, and recording goes on once there is room', async () => {
    app = await testApp({ COMPACT_DB: join(dir, 'gateway.db') })
    const history = [
      user('Fix the parser'),
      assistant(call('t1', 'bash', { command: 'cat src/parse.ts' })),
      results(result('t1', 'x'.repeat(4_000))),
      assistant('Read it.'),
      user('Now fix it')
    ]
    const compact = (session: string) =>
      app!.inject({ method: 'POST', url: '/v1/compact', payload: { messages: history, mode: 'manual', session_id: session } })
    const listed = async (session: string): Promise<number> =>
      (await app!.inject({ url: `/v1/sessions/${session}/compactions` })).json<{ compactions: unknown[] }>().compactions.length

    const before = await compact('on-record')
    expect(before.statusCode).toBe(200)
    expect(before.headers['x-compaction-record']).toBeUndefined()
    await until('the first record written', async () => (await listed('on-record')) === 1)

    // the disk fills
    const filler = join(dir, 'filler')
    try {
      writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024))
    } catch {
      // written up to the disk's end: what is wanted
    }
    // every compaction is answered; once not even the journal's next line fits, each is flagged
    const flags: unknown[] = []
    for (let i = 0; i < 40 && !flags.includes('not-kept'); i++) {
      const full = await compact('while-full')
      expect(full.statusCode).toBe(200)
      expect(full.json<{ compacted: boolean }>().compacted).toBe(true)
      flags.push(full.headers['x-compaction-record'])
    }
    expect(flags).toContain('not-kept')
    expect(await app.metrics.registry.getSingleMetricAsString('compaction_store_errors_total')).toMatch(/operation="journal"} [1-9]/)
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(503)

    // room again: what was on record still is, and a compaction is journaled and recorded as before
    rmSync(filler)
    await until('/readyz ready again', async () => (await app!.inject({ url: '/readyz' })).statusCode === 200)
    expect(await listed('on-record')).toBe(1)
    const after = await compact('after-room')
    expect(after.statusCode).toBe(200)
    expect(after.headers['x-compaction-record']).toBeUndefined()
    await until('the record after the disk had room again', async () => (await listed('after-room')) === 1)
  })
})
