import { describe, expect, it } from 'vitest'
import { deleteSession } from '../../src/service/sessions.js'
import type { DeletedSession } from '../../src/storage/store.js'

const deletedRows: DeletedSession = { compactions: 2, cold_layer: 3, cached: 1, cache_keys: ['k1'], space_reclaimed: true }

describe('deleteSession', () => {
  it('forgets the proxy’s conversations before the rows go (the store’s deletion waits for the session’s writes: test/server/writes.test.ts), then drops the locks', async () => {
    const steps: string[] = []
    const result = await deleteSession(
      {
        forgetConversations: async (key, session) => (steps.push(`forget ${key}/${session}`), 2),
        store: { deleteSession: async (session, key) => (steps.push(`delete ${key}/${session}`), deletedRows) },
        dropLocks: async (keys) => void steps.push(`locks ${keys.join(',')}`)
      },
      'alpha',
      'sess'
    )
    expect(steps).toEqual(['forget alpha/sess', 'delete alpha/sess', 'locks k1'])
    expect(result).toEqual({ ...deletedRows, conversations: 2 })
  })

  it('tells of locks Redis would not drop and answers all the same; drops none where the session cached nothing', async () => {
    const faults: unknown[] = []
    const dropped: string[][] = []
    const deps = {
      dropLocks: async (keys: readonly string[]) => {
        dropped.push([...keys])
        throw new Error('Redis is down')
      },
      onLockFault: (err: unknown) => void faults.push(err)
    }
    expect(await deleteSession({ ...deps, store: { deleteSession: async () => deletedRows } }, 'a', 's')).toMatchObject({ compactions: 2, conversations: 0 })
    expect(String(faults[0])).toContain('Redis is down')
    await deleteSession({ ...deps, store: { deleteSession: async () => ({ ...deletedRows, cached: 0, cache_keys: [] }) } }, 'a', 's')
    expect(dropped).toEqual([['k1']])
  })
})
