import { describe, expect, it } from 'vitest'
import { ReadYourWrites, WritesAfterAnswers } from '../../src/storage/read-your-writes.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import type { ColdSaved, CompactionRecord, MemoryOwner, MemoryRow } from '../../src/storage/store.js'
import { testApp } from '../helpers/app.js'
import { tempDb } from '../helpers/process.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import type { Message } from '../../src/compaction/index.js'
import { until } from '../helpers/wait.js'

/** A promise and the function that settles it. */
function held(): { promise: Promise<void>; release: () => void } {
  let release!: () => void
  const promise = new Promise<void>((resolve) => (release = resolve))
  return { promise, release }
}

/** Lets every pending callback and timer of this turn run. */
const turns = async (n = 10): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

describe('WritesAfterAnswers', () => {
  it("a read of a session waits for that session's writes reserved before it, begun or not, and for no other session's", async () => {
    const writes = new WritesAfterAnswers()
    const log: string[] = []
    const slow = held()
    const beginA = writes.reserve('alpha', 's1', async () => {
      log.push('a begun')
      await slow.promise
      log.push('a written')
    })
    const beginB = writes.reserve('alpha', 's2', async () => void log.push('b written'))
    const settled = { a: false, b: false, other: false }
    void writes.settled('alpha', 's1').then(() => (settled.a = true))
    void writes.settled('alpha', 's2').then(() => (settled.b = true))
    void writes.settled('beta', 's1').then(() => (settled.other = true))
    await turns()
    expect(settled).toEqual({ a: false, b: false, other: true })
    beginB()
    beginB()
    await turns()
    expect(log).toEqual(['b written'])
    expect(settled).toEqual({ a: false, b: true, other: true })
    beginA()
    await turns()
    expect(log).toEqual(['b written', 'a begun'])
    expect(settled.a).toBe(false)
    slow.release()
    await turns()
    expect(log).toEqual(['b written', 'a begun', 'a written'])
    expect(settled.a).toBe(true)
  })

  it('drain begins the writes still waiting for their answers and settles when all are written; a write that throws settles too', async () => {
    const writes = new WritesAfterAnswers()
    const log: string[] = []
    writes.reserve('alpha', 's1', async () => void log.push('never begun by its answer'))
    writes.reserve('alpha', undefined, async () => {
      throw new Error('a failing write')
    })
    await writes.drain()
    expect(log).toEqual(['never begun by its answer'])
    await expect(writes.settled('alpha', 's1')).resolves.toBeUndefined()
  })
})

describe('ReadYourWrites', () => {
  const owner = (session: string, compaction = 'cmp_1'): MemoryOwner => ({
    compaction_id: compaction,
    session_id: session,
    key_name: 'alpha',
    created_at: '2026-12-01T00:00:00.000Z'
  })
  const rows: MemoryRow[] = [{ kind: 'ask', text: 'fix the flaky retry test', from: 0, to: 0 }]

  it("reads a session, and deletes it, only after that session's reserved writes have landed; the key's list after all of its own", async () => {
    const store = new ReadYourWrites(new SqliteStore(':memory:'))
    const begin = store.reserve('alpha', 's1', async () => void (await store.saveMemory(owner('s1'), rows)))
    const hits = store.recall('s1', 'alpha', { text: 'flaky retry', limit: 5 })
    const listed = store.listSessions('alpha', { limit: 10 })
    let settled = false
    void hits.then(() => (settled = true))
    await turns()
    // the read waits: the write has not begun (its answer has not gone)
    expect(settled).toBe(false)
    begin()
    expect((await hits).map((h) => h.text)).toEqual(['fix the flaky retry test'])
    await listed
    const gone = store.reserve('alpha', 's1', async () => void (await store.saveMemory(owner('s1', 'cmp_2'), rows)))
    const deletion = store.deleteSession('s1', 'alpha')
    gone()
    expect((await deletion).cold_layer).toBe(2)
    expect(await store.recall('s1', 'alpha', { text: 'flaky retry', limit: 5 })).toEqual([])
    await store.close()
  })

  it("says a failed read or deletion as a StoreError naming what could not be done; a made-up cursor stays the client's error", async () => {
    const inner = new SqliteStore(':memory:')
    const store = new ReadYourWrites(inner)
    await expect(store.listRecords('s1', 'alpha', { limit: 5, cursor: 'not-a-cursor' })).rejects.toMatchObject({ name: 'InvalidCursorError' })
    await inner.close()
    await expect(store.timeline('s1', 'alpha', 5)).rejects.toMatchObject({ name: 'StoreError', failed: 'read' })
    await expect(store.deleteSession('s1', 'alpha')).rejects.toMatchObject({ name: 'StoreError', failed: 'written' })
  })
})

/** A SQLite store whose record writes, or cold-layer writes, wait until the test releases them. */
class HeldStore extends SqliteStore {
  readonly saves = held()
  readonly gate = held()
  constructor(
    readonly shared: boolean,
    private readonly hold: 'record' | 'cold layer'
  ) {
    super(':memory:')
  }
  override async saveRecord(record: CompactionRecord): Promise<void> {
    if (this.hold === 'record') {
      this.saves.release()
      await this.gate.promise
    }
    return super.saveRecord(record)
  }
  override async saveMemory(owner: MemoryOwner, rows: readonly MemoryRow[]): Promise<ColdSaved> {
    if (this.hold === 'cold layer') {
      this.saves.release()
      await this.gate.promise
    }
    return super.saveMemory(owner, rows)
  }
}

describe('a compaction and its record', () => {
  const history = { messages: [user('fix the date parser'), assistant('looking'), user('and?')], mode: 'manual', session_id: 'sess-1' }

  for (const [shared, hold] of [
    [false, 'record'],
    [true, 'record'],
    [true, 'cold layer']
  ] as const) {
    it(`${shared ? 'a store other replicas read (PostgreSQL)' : 'SQLite'}: the answer waits for the ${hold}`, async () => {
      const store = new HeldStore(shared, hold)
      const app = await testApp({}, { store })
      let answered = false
      const answer = app.inject({ method: 'POST', url: '/v1/compact', payload: history }).then((r) => ((answered = true), r))
      await store.saves.promise
      await turns()
      expect(answered).toBe(false)
      store.gate.release()
      expect((await answer).statusCode).toBe(200)
      expect((await app.inject({ url: '/v1/sessions/sess-1/compactions' })).json().compactions).toHaveLength(1)
      await app.close()
    })
  }

  it('SQLite: the answer goes before the cold layer is written, and a read of the session waits for it', async () => {
    const store = new HeldStore(false, 'cold layer')
    const app = await testApp({}, { store })
    expect((await app.inject({ method: 'POST', url: '/v1/compact', payload: history })).statusCode).toBe(200)
    await store.saves.promise
    let listed = false
    const list = app.inject({ url: '/v1/sessions/sess-1/compactions' }).then((r) => ((listed = true), r))
    const recap = app.inject({ url: '/v1/sessions/sess-1/recap' })
    await turns()
    expect(listed).toBe(false)
    store.gate.release()
    expect((await list).json().compactions).toHaveLength(1)
    expect((await recap).statusCode).toBe(200)
    await app.close()
  })

  it('the record of an answer given just before shutdown is in the database after it', async () => {
    const db = tempDb()
    const app = await testApp({ COMPACT_DB: db })
    expect((await app.inject({ method: 'POST', url: '/v1/compact', payload: history })).statusCode).toBe(200)
    await app.close()
    const reopened = new SqliteStore(db)
    expect((await reopened.listRecords('sess-1', '', { limit: 10 })).records).toHaveLength(1)
    await reopened.close()
  })
})

describe('a proxied compaction and its record', () => {
  const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')
  /** A task and 40 shell steps of 2,000 characters: over a budget of 6,000 tokens. */
  const history: Message[] = [user('Fix the failing parser test in src/parse.ts')]
  for (let i = 0; i < 40; i++) history.push(...shellStep(`toolu_${i}`, `cat src/module_${i}.ts`, `line ${i}: ${'x'.repeat(2_000)}`))
  history.push(assistant('Read 40 modules.'), user('Now update docs/parser.md to match'))

  for (const [shared, hold] of [
    [false, 'record'],
    [false, 'cold layer'],
    [true, 'record']
  ] as const) {
    it(`${shared ? 'a store other replicas read' : 'SQLite'}: the request is forwarded while its ${hold} is written, ${hold === 'record' ? 'and the answer waits for it' : 'the answer does not wait, and a read of the session does'}`, async () => {
      const fake = await new FakeAnthropic().start()
      fake.fallback = (r) => (isSummaryCall(r) ? { toolInput: { objective: 'Fix the failing parser test' } } : { text: 'forwarded' })
      const store = new HeldStore(shared, hold)
      const app = await testApp(
        { ANTHROPIC_API_KEY: 'sk-ant-upstream-writes-test-000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_PRECOMPUTE_AT: 'off' },
        { store }
      )
      let answered = false
      const answer = app
        .inject({
          method: 'POST',
          url: '/v1/messages',
          headers: { 'anthropic-version': '2023-06-01', 'x-compaction-budget': '6000', 'x-compaction-session': 'proxy-held' },
          payload: { model: 'claude-test', max_tokens: 16, messages: history }
        })
        .then((r) => ((answered = true), r))
      await store.saves.promise
      // The write has begun and is held; the forwarded request reaches the upstream all the same.
      await until('the forwarded request reaches the upstream', () => fake.requests.some((r) => !isSummaryCall(r)))
      expect(fake.requests.filter((r) => !isSummaryCall(r))).toHaveLength(1)
      if (hold === 'cold layer') {
        const res = await answer
        expect(res.statusCode).toBe(200)
        expect(res.headers['x-compaction']).toBe('compacted')
        let listed = false
        const list = app.inject({ url: '/v1/sessions/proxy-held/compactions' }).then((r) => ((listed = true), r))
        await turns()
        expect(listed).toBe(false)
        store.gate.release()
        expect((await list).json().compactions).toHaveLength(1)
      } else {
        // the upstream has answered (its request is in): the answer still waits for the record
        await turns()
        expect(answered).toBe(false)
        store.gate.release()
        expect((await answer).statusCode).toBe(200)
        expect((await app.inject({ url: '/v1/sessions/proxy-held/compactions' })).json().compactions).toHaveLength(1)
      }
      await app.close()
      await fake.close()
    })
  }
})
