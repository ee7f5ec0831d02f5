import { afterAll, describe, expect, it } from 'vitest'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { startServer } from '../helpers/process.js'
import { dropSchemas, pgBehindRelay, pgMissing } from '../helpers/services.js'
import { until } from '../helpers/wait.js'

describe.skipIf(pgMissing !== undefined)(
  `the server process with PostgreSQL cut and blackholed under load${pgMissing ? ` (skipped: ${pgMissing})` : ''}`,
  () => {
    afterAll(async () => dropSchemas())

    it('stays up, answers every compaction, is not ready while the database is gone, and records again once it is back', async () => {
      const { url, relay } = await pgBehindRelay()
      const server = await startServer({ COMPACT_DB: url })
      const messages = loadTranscripts(FIXTURE_DIR)[0]!.messages
      const compact = async (session: string): Promise<{ status: number; id?: string }> => {
        const res = await fetch(`${server.url}/v1/compact`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ messages, mode: 'manual', session_id: session })
        })
        const body = (await res.json()) as { summary?: { id: string } }
        return { status: res.status, ...(body.summary ? { id: body.summary.id } : {}) }
      }
      const ready = async (): Promise<number> => (await fetch(`${server.url}/readyz`)).status
      const statuses: number[] = []
      // Each phase lasts until compactions have been answered in it, however slow the machine: a phase of fixed
      // time saw ten answers in all on a loaded machine, where the database's timeouts hold every request.
      const answered = async (count: number): Promise<void> => {
        const from = statuses.length
        await until(`${count} more compactions answered`, async () => statuses.length >= from + count, 60_000)
      }
      let loading = true
      try {
        const load = Array.from({ length: 4 }, async (_, c) => {
          while (loading) statuses.push((await compact(`faults-${c}`)).status)
        })
        // resets: every connection cut under the load, five times, with answers between the cuts
        for (let i = 0; i < 5; i++) {
          await answered(2)
          await relay.down()
          await relay.up()
        }
        // a blackhole: nothing answers, nothing resets; compactions are still answered while it lasts
        relay.blackhole()
        await until('/readyz says 503', async () => (await ready()) === 503, 30_000)
        await answered(4)
        await relay.down()
        await relay.up()
        await until('/readyz says 200', async () => (await ready()) === 200, 30_000)
        await answered(4)
        loading = false
        await Promise.all(load)

        expect(server.child.exitCode).toBeNull()
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
  }
)
