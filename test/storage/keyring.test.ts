import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { randomBytes } from 'node:crypto'
import Database from 'better-sqlite3'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { KeyRing, KeyUnavailableError, indexKey, sealingKey } from '../../src/storage/keyring.js'
import { PostgresStore } from '../../src/storage/postgres.js'
import { rewrapKeys } from '../../src/storage/rewrap.js'
import { Terms, seal, unseal } from '../../src/storage/sealing.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import type { CompactionRecord, Store } from '../../src/storage/store.js'
import { masterKeys } from '../../src/server/master-key.js'
import { ConfigError } from '../../src/server/config.js'
import { tempDb } from '../helpers/process.js'
import { compactionRecord } from '../helpers/records.js'
import { dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

/**
 * Session keys wrapped under the operator's master key: a copied database opens nothing without it, a
 * wrapped key moved to another row opens nothing, a rotation keeps every session readable, and the keys that
 * seal the texts and make the index terms are apart.
 */
const MASTER = Buffer.from('a master key of the operator, 32 characters or more')
const OTHER = Buffer.from('another master key, the one a rotation brings in')
const CANARY = 'canary-7f3a9c the rollout codename is bluefin-7'

const stores: Store[] = []
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => undefined)
})
afterAll(async () => {
  if (!pgMissing) await dropSchemas()
})

const record = (id: string, session: string): CompactionRecord => compactionRecord(id, session, 'tenant', '2026-12-06T00:00:00.000Z', `summary: ${CANARY}`)

async function fill(store: Store, session = 's1'): Promise<void> {
  await store.saveRecord(record(`cmp_${session}`, session))
  await store.saveMemory({ compaction_id: `cmp_${session}`, session_id: session, key_name: 'tenant', created_at: '2026-12-06T00:00:00.000Z' }, [
    { kind: 'output', text: CANARY, from: 1, to: 1 }
  ])
}

async function readable(store: Store, session = 's1'): Promise<string[]> {
  return (await store.recall(session, 'tenant', { text: 'rollout codename', limit: 5 })).map((h) => h.text)
}

describe('KeyRing', () => {
  it('wraps a new key under the master key, bound to its row: without the master key, or moved to another row, it opens nothing', () => {
    const ring = new KeyRing({ current: MASTER })
    const stored = ring.fresh('owner-a')
    const key = ring.open('owner-a', stored)
    expect(key).toHaveLength(64)
    expect(() => new KeyRing().open('owner-a', stored)).toThrow(KeyUnavailableError)
    expect(() => new KeyRing({ current: OTHER }).open('owner-a', stored)).toThrow(/not given/)
    expect(() => ring.open('owner-b', stored)).toThrow(/moved from another row/)
    const flipped = Buffer.from(stored)
    flipped[flipped.length - 1]! ^= 1
    expect(() => ring.open('owner-a', flipped)).toThrow(KeyUnavailableError)
    // the stored form holds neither half of the key
    expect(stored.includes(sealingKey(key))).toBe(false)
    expect(stored.includes(indexKey(key))).toBe(false)
  })

  it('keeps the sealing key and the index key apart, and opens a key of an earlier build (32 bytes) as it always was', () => {
    const ring = new KeyRing()
    const key = ring.open('o', ring.fresh('o'))
    expect(sealingKey(key).equals(indexKey(key))).toBe(false)
    // a text sealed under the session's key does not open under its index half, and the terms are not the sealing key's
    const sealed = seal(key, CANARY)
    expect(unseal(sealingKey(key), sealed)).toBe(CANARY)
    expect(() => unseal(indexKey(key), sealed)).toThrow()
    expect(new Terms(key).of('rollout')).toBe(new Terms(indexKey(key)).of('rollout'))
    expect(new Terms(key).of('rollout')).not.toBe(new Terms(sealingKey(key)).of('rollout'))
    const legacy = randomBytes(32)
    expect(ring.open('o', legacy)).toEqual(legacy)
    expect(unseal(ring.open('o', legacy), seal(legacy, CANARY))).toBe(CANARY)
  })

  it('rotates: the previous master key still opens its keys, rewrap moves each under the new one (an earlier build’s key too), and then the new one alone opens all', () => {
    const before = new KeyRing({ current: MASTER })
    const wrapped = before.fresh('o1')
    const legacy = randomBytes(32)
    const during = new KeyRing({ current: OTHER, previous: [MASTER] })
    expect(during.open('o1', wrapped)).toEqual(before.open('o1', wrapped))
    const moved = during.rewrap('o1', wrapped)!
    expect(during.rewrap('o1', moved)).toBeUndefined()
    const after = new KeyRing({ current: OTHER })
    expect(after.open('o1', moved)).toEqual(before.open('o1', wrapped))
    expect(after.open('o2', during.rewrap('o2', legacy)!)).toEqual(legacy)
    expect(() => new KeyRing({ current: MASTER }).open('o1', moved)).toThrow(KeyUnavailableError)
  })
})

describe('the master key as the operator gives it', () => {
  it('is read from the setting, a file or a command; refused where short, given twice, or failing, naming the setting', () => {
    const dir = dirname(tempDb())
    const file = join(dir, 'master.key')
    writeFileSync(file, `${MASTER.toString()}\n`, { mode: 0o600 })
    expect(masterKeys({ COMPACT_MASTER_KEY: MASTER.toString() }).current).toEqual(MASTER)
    expect(masterKeys({ COMPACT_MASTER_KEY_FILE: file }).current).toEqual(MASTER)
    expect(masterKeys({ COMPACT_MASTER_KEY_COMMAND: `cat '${file}'` }).current).toEqual(MASTER)
    expect(masterKeys({})).toEqual({})
    const refused = (given: Parameters<typeof masterKeys>[0], variable: string): void => {
      let thrown: unknown
      try {
        masterKeys(given)
      } catch (err) {
        thrown = err
      }
      expect(thrown).toBeInstanceOf(ConfigError)
      expect((thrown as ConfigError).variable).toBe(variable)
      expect((thrown as Error).message).not.toContain(MASTER.toString())
    }
    refused({ COMPACT_MASTER_KEY: 'short' }, 'COMPACT_MASTER_KEY')
    refused({ COMPACT_MASTER_KEY: MASTER.toString(), COMPACT_MASTER_KEY_FILE: file }, 'COMPACT_MASTER_KEY_FILE')
    refused({ COMPACT_MASTER_KEY_FILE: join(dir, 'absent') }, 'COMPACT_MASTER_KEY_FILE')
    refused({ COMPACT_MASTER_KEY_COMMAND: 'exit 3' }, 'COMPACT_MASTER_KEY_COMMAND')
    refused({ COMPACT_MASTER_KEY_PREVIOUS: MASTER.toString() }, 'COMPACT_MASTER_KEY_PREVIOUS')
  })
})

describe('a SQLite store with a master key', () => {
  it('opens nothing of a copied file without the master key, every session with it; the file holds neither the texts nor a key in clear', async () => {
    const path = tempDb()
    const store = new SqliteStore(path, { keys: { current: MASTER } })
    stores.push(store)
    await fill(store)
    expect(await readable(store)).toEqual([CANARY])
    await store.close()
    stores.pop()
    const copy = `${path}.copy`
    copyFileSync(path, copy)
    for (const suffix of ['-wal', '-shm']) {
      try {
        copyFileSync(`${path}${suffix}`, `${copy}${suffix}`)
      } catch {
        // (closed: the WAL was checkpointed into the file)
      }
    }
    const keys = new Database(copy, { readonly: true }).prepare('SELECT key FROM session_keys').pluck().all() as Buffer[]
    expect(keys.length).toBeGreaterThan(0)
    for (const k of keys) expect(k[0]).toBe(0x02)
    expect(readFileSync(copy).includes(Buffer.from('canary-7f3a9c'))).toBe(false)
    for (const keysGiven of [{}, { current: OTHER }]) {
      const stolen = new SqliteStore(copy, { keys: keysGiven })
      stores.push(stolen)
      await expect(readable(stolen)).rejects.toThrow(/master key/)
      await expect(stolen.listSessions('tenant', { limit: 10 })).rejects.toThrow(/master key/)
    }
    const owner = new SqliteStore(copy, { keys: { current: MASTER } })
    stores.push(owner)
    expect(await readable(owner)).toEqual([CANARY])
    expect((await owner.listSessions('tenant', { limit: 10 })).sessions.map((s) => s.session_id)).toEqual(['s1'])
  })

  it('rotates while sessions stay readable: both keys meanwhile, `rewrap` moves every key, then the new key alone reads all', async () => {
    const path = tempDb()
    const old = new SqliteStore(path, { keys: { current: MASTER } })
    await fill(old, 's1')
    await old.close()
    // a key of the time before any master key: taken, and wrapped by the rotation
    const plain = new SqliteStore(path)
    await expect(readable(plain)).rejects.toThrow(/master key/)
    await plain.close()
    const during = new SqliteStore(path, { keys: { current: OTHER, previous: [MASTER] } })
    await fill(during, 's2')
    expect(await readable(during, 's1')).toEqual([CANARY])
    await during.close()
    expect(await rewrapKeys(path, new KeyRing({ current: OTHER, previous: [MASTER] }))).toEqual({ keys: 2, rewrapped: 1 })
    const after = new SqliteStore(path, { keys: { current: OTHER } })
    stores.push(after)
    expect(await readable(after, 's1')).toEqual([CANARY])
    expect(await readable(after, 's2')).toEqual([CANARY])
  })
})

describe.skipIf(pgMissing !== undefined)(`a PostgreSQL store with a master key${pgMissing ? ` (skipped: ${pgMissing})` : ''}`, () => {
  it('opens nothing without the master key (a replica, a dump restored elsewhere), every session with it, and rotates', async () => {
    const url = freshPgUrl()
    const store = new PostgresStore(url, { keys: { current: MASTER } })
    stores.push(store)
    await fill(store)
    expect(await readable(store)).toEqual([CANARY])
    const stolen = new PostgresStore(url)
    stores.push(stolen)
    await expect(readable(stolen)).rejects.toThrow(/master key/)
    expect(await rewrapKeys(url, new KeyRing({ current: OTHER, previous: [MASTER] }))).toEqual({ keys: 1, rewrapped: 1 })
    const after = new PostgresStore(url, { keys: { current: OTHER } })
    stores.push(after)
    expect(await readable(after)).toEqual([CANARY])
    await expect(readable(new PostgresStore(url, { keys: { current: MASTER } }))).rejects.toThrow(KeyUnavailableError)
  })
})
