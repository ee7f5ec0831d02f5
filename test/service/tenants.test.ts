import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { StoreUnavailableError } from '../../src/contract/errors.js'
import { TenantNames, earlierName, saltedName } from '../../src/service/tenants.js'

const digest = createHash('sha256').update('key-unnamed-0987654321').digest()

/** A store with no tenant's data, whose salt is kept by the first caller; `away` makes every read fail. */
function store() {
  const state = { salt: undefined as string | undefined, away: false, reads: 0 }
  const fail = <T>(value: T): Promise<T> => (state.away ? Promise.reject(new Error('connection refused')) : Promise.resolve(value))
  return {
    state,
    firstState: async (_key: string, value: unknown) => {
      state.reads++
      await fail(undefined)
      state.salt ??= value as string
      return state.salt
    },
    listSessions: async () => fail({ sessions: [], next_cursor: null }),
    activity: async () => fail([])
  }
}
const quiet = { warn: () => undefined }

describe('TenantNames', () => {
  it("names a key by an HMAC of its hash under the store's salt, once for requests racing", async () => {
    const s = store()
    const names = new TenantNames(s, quiet, Date.now)
    const raced = await Promise.all([names.of(digest), names.of(digest), names.of(digest)])
    expect(new Set(raced)).toEqual(new Set([saltedName(Buffer.from(s.state.salt as string, 'base64'), digest)]))
    expect(raced[0]).not.toBe(earlierName(digest))
    expect(s.state.reads).toBe(1)
  })

  it("answers a store that is away as the store's fault, and asks again on the next request", async () => {
    const s = store()
    s.state.away = true
    const names = new TenantNames(s, quiet, Date.now)
    await expect(names.of(digest)).rejects.toBeInstanceOf(StoreUnavailableError)
    s.state.away = false
    await expect(names.of(digest)).resolves.toMatch(/^key-[0-9a-f]{16}$/)
  })
})
