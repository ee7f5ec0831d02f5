import { afterAll, describe, expect, it } from 'vitest'
import { type SharedState, connectRedis, rateLimitStore } from '../../src/storage/redis.js'
import { REDIS_URL, freshRedisPrefix, redisMissing } from '../helpers/services.js'

interface Store {
  incr(key: string, callback: (err: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number, max: number): void
  child(routeOptions: unknown): Store
}

/** One count, as the rate-limit plugin asks for it. */
function incr(store: Store, key: string, windowMs = 60_000): Promise<{ current: number; ttl: number }> {
  return new Promise((resolve, reject) =>
    store.incr(key, (err, result) => (err || !result ? reject(err ?? new Error('no result')) : resolve(result)), windowMs, 10)
  )
}

/** The store the plugin makes from its options (it constructs the class it is given). */
function storeOn(shared: SharedState): Store {
  const Ctor = rateLimitStore(shared) as unknown as new (options: unknown) => Store
  return new Ctor({ continueExceeding: false, exponentialBackoff: false })
}

const route = (url: string): unknown => ({ routeInfo: { method: 'GET', url }, continueExceeding: false, exponentialBackoff: false })

describe.skipIf(redisMissing !== undefined)(`the rate limit's store${redisMissing ? ` (skipped: ${redisMissing})` : ''}`, () => {
  const opened: SharedState[] = []
  const connect = async (prefix: string): Promise<SharedState> => {
    const shared = await connectRedis(`${REDIS_URL}?prefix=${prefix}`, { onDown: () => undefined, onUp: () => undefined })
    opened.push(shared)
    for (let i = 0; i < 100 && !shared.available(); i++) await new Promise((r) => setTimeout(r, 20))
    expect(shared.available()).toBe(true)
    return shared
  }
  afterAll(async () => {
    for (const shared of opened) await shared.close()
  })

  it('counts in Redis for every replica: two replicas share one window, a route counts apart', async () => {
    const prefix = freshRedisPrefix()
    const [a, b] = [storeOn(await connect(prefix)), storeOn(await connect(prefix))]
    expect((await incr(a, 'key:acme')).current).toBe(1)
    expect((await incr(b, 'key:acme')).current).toBe(2)
    const third = await incr(a, 'key:acme')
    expect(third.current).toBe(3)
    expect(third.ttl).toBeGreaterThan(0)
    expect(third.ttl).toBeLessThanOrEqual(60_000)
    expect((await incr(a.child(route('/v1/doctrine')), 'key:acme')).current).toBe(1)
    expect((await incr(b.child(route('/v1/doctrine')), 'key:acme')).current).toBe(2)
  })

  it('counts in the process while Redis is down, and in Redis again once it is back', async () => {
    const prefix = freshRedisPrefix()
    const real = await connect(prefix)
    let up = true
    const flaky: SharedState = { redis: real.redis, available: () => up && real.available(), close: () => real.close() }
    const store = storeOn(flaky)
    expect((await incr(store, 'ip:1')).current).toBe(1)
    up = false
    // the replica's own count, from its first request while Redis is away
    expect((await incr(store, 'ip:1')).current).toBe(1)
    expect((await incr(store, 'ip:1')).current).toBe(2)
    up = true
    expect((await incr(store, 'ip:1')).current).toBe(2) // Redis's count, untouched meanwhile
  })

  it('counts in the process when a command fails, Redis said to be there', async () => {
    const real = await connect(freshRedisPrefix())
    const failing: SharedState = { redis: real.redis, available: () => true, close: () => real.close() }
    const store = storeOn(failing)
    real.redis.disconnect() // no offline queue: the next command fails at once
    expect((await incr(store, 'ip:2')).current).toBe(1)
    expect((await incr(store, 'ip:2')).current).toBe(2)
  })
})
