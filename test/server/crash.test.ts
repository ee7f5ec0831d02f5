import { afterAll, describe, expect, it } from 'vitest'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { startServer, tempDb } from '../helpers/process.js'
import { dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

const SESSIONS = 4

/** Every record id of a session, page by page. */
async function recordIds(url: string, session: string): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | null = null
  do {
    const page = (await (
      await fetch(`${url}/v1/sessions/${session}/compactions?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
    ).json()) as {
      compactions: { id: string }[]
      next_cursor: string | null
    }
    ids.push(...page.compactions.map((c) => c.id))
    cursor = page.next_cursor
  } while (cursor)
  return ids
}

describe('a process killed under load', () => {
  afterAll(async () => dropSchemas())

  it('keeps the record of every compaction it answered (SQLite)', async () => killedUnderLoad(tempDb()))
  it.skipIf(pgMissing !== undefined)(`keeps the record of every compaction it answered (PostgreSQL)${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, async () =>
    killedUnderLoad(freshPgUrl())
  )
})

/** Eight clients compacting, the server killed (SIGKILL: no shutdown, no flush) once 40 were answered, then restarted on the same database. */
async function killedUnderLoad(db: string): Promise<void> {
  const body = (i: number): string =>
    JSON.stringify({ messages: loadTranscripts(FIXTURE_DIR)[0]!.messages, mode: 'manual', session_id: `killed-${i % SESSIONS}` })
  const server = await startServer({ COMPACT_DB: db })
  const answered: string[] = []
  let sent = 0
  let killed = false
  try {
    // eight clients at once, killed (SIGKILL: no shutdown, no flush) once 40 compactions were answered
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!killed) {
          const i = sent++
          try {
            const res = await fetch(`${server.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(i) })
            const text = await res.text()
            if (res.status === 200) answered.push((JSON.parse(text) as { summary: { id: string } }).summary.id)
          } catch {
            // a request the kill cut off was never answered
          }
          if (answered.length >= 40 && !killed) {
            killed = true
            server.child.kill('SIGKILL')
          }
        }
      })
    )
  } finally {
    server.child.kill('SIGKILL')
  }
  await server.exited
  expect(answered.length).toBeGreaterThanOrEqual(40)

  const again = await startServer({ COMPACT_DB: db })
  try {
    const kept = new Set<string>()
    for (let s = 0; s < SESSIONS; s++) for (const id of await recordIds(again.url, `killed-${s}`)) kept.add(id)
    expect(answered.filter((id) => !kept.has(id))).toEqual([])
  } finally {
    again.child.kill('SIGTERM')
    await again.exited
  }
}
