import { afterAll, describe, expect, it } from 'vitest'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { startServer } from '../helpers/process.js'
import { dropSchemas, pgBehindRelay, pgMissing } from '../helpers/services.js'

/** Polls until `check` holds (what is asserted is the condition, never the time it took). */
async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached')
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe.skipIf(pgMissing !== undefined)(`the server process with PostgreSQL cut and blackholed under load${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, () => {
  afterAll(async () => dropSchemas())

  it('stays up, answers every compaction, is not ready while the database is gone, and records again once it is back', async () => {
    const { url, relay } = await pgBehindRelay()
    const server = await startServer({ COMPACT_DB: url })
    const messages = loadTranscripts(FIXTURE_DIR)[0]!.messages
    const compact = async (session: string): Promise<{ status: number; id?: string }> => {
      const res = await fetch(`${server.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages, mode: 'manual', session_id: session }) })
      const body = (await res.json()) as { summary?: { id: string } }
      return { status: res.status, ...(body.summary ? { id: body.summary.id } : {}) }
    }
    const ready = async (): Promise<number> => (await fetch(`${server.url}/readyz`)).status
    const statuses: number[] = []
    let loading = true
    try {
      const load = Array.from({ length: 4 }, async (_, c) => {
        while (loading) statuses.push((await compact(`faults-${c}`)).status)
      })
      // resets: every connection cut under the load, five times
      for (let i = 0; i < 5; i++) {
        await new Promise((r) => setTimeout(r, 150))
        await relay.down()
        await relay.up()
      }
      // a blackhole: nothing answers, nothing resets
      relay.blackhole()
      await until(async () => (await ready()) === 503, 30_000)
      await relay.down()
      await relay.up()
      await until(async () => (await ready()) === 200, 30_000)
      loading = false
      await Promise.all(load)

      expect(server.child.exitCode).toBeNull()
      expect(statuses.length).toBeGreaterThan(10)
      expect(statuses.filter((s) => s !== 200)).toEqual([])
      // once back, what is answered is recorded
      const after = await compact('faults-after')
      expect(after.status).toBe(200)
      const records = (await (await fetch(`${server.url}/v1/sessions/faults-after/compactions`)).json()) as { compactions: { id: string }[] }
      expect(records.compactions.map((r) => r.id)).toEqual([after.id])
    } finally {
      loading = false
      server.child.kill('SIGKILL')
      await relay.down().catch(() => undefined)
    }
  }, 120_000)
})
