import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import { Redis } from 'ioredis'

/**
 * Redis, shared by the replicas for what must be counted or decided once across them: rate limits and
 * the summaries in flight. Every use has a local fallback: with Redis down, commands fail at once (no
 * offline queue), the callers fall back to their local state, and the client reconnects on its own.
 */
export interface SharedState {
  readonly redis: Redis
  /** Whether Redis answers now. */
  available(): boolean
  close(): Promise<void>
}

export interface RedisEvents {
  /** Redis stopped answering (told once per outage). */
  onDown: (err: Error) => void
  /** Redis answers again. */
  onUp: () => void
}

/** The URL as ioredis takes it, and the key prefix named by its `prefix` parameter (to keep deployments apart). */
export function parseRedisUrl(url: string): { url: string; keyPrefix: string } {
  const parsed = new URL(url)
  const keyPrefix = parsed.searchParams.get('prefix') ?? ''
  parsed.searchParams.delete('prefix')
  return { url: parsed.toString(), keyPrefix }
}

export function connectRedis(url: string, events: RedisEvents): SharedState {
  const target = parseRedisUrl(url)
  const redis = new Redis(target.url, {
    keyPrefix: target.keyPrefix,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: 2_000,
    // Reconnect forever, at most every two seconds.
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    lazyConnect: false
  })
  let down = false
  redis.on('ready', () => {
    if (down) events.onUp()
    down = false
  })
  redis.on('error', (err: Error) => {
    if (!down) events.onDown(err)
    down = true
  })
  return {
    redis,
    available: () => redis.status === 'ready',
    close: async () => {
      redis.disconnect()
    }
  }
}

/** A fixed-window counter: one INCR, the window set on the first. */
const INCR_WINDOW = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {current, ttl}`

interface Counted {
  current: number
  ttl: number
}
type Callback = (err: Error | null, result?: Counted) => void

/** The per-process counter used while Redis is away (and alone when there is no Redis). */
class LocalWindows {
  private readonly windows = new Map<string, { count: number; endsAt: number }>()

  incr(key: string, timeWindow: number): Counted {
    const now = Date.now()
    let w = this.windows.get(key)
    if (!w || w.endsAt <= now) {
      if (this.windows.size > 100_000) for (const [k, v] of this.windows) if (v.endsAt <= now) this.windows.delete(k)
      w = { count: 0, endsAt: now + timeWindow }
      this.windows.set(key, w)
    }
    w.count++
    return { current: w.count, ttl: w.endsAt - now }
  }
}

/**
 * A store for @fastify/rate-limit: counts in Redis, shared by every replica; while Redis is down, counts
 * in this process (each replica then limits on its own, as without Redis) and picks Redis up again when
 * it is back.
 */
export function rateLimitStore(shared: SharedState, prefix = 'cg:rl:'): FastifyRateLimitStoreCtor {
  const local = new LocalWindows()
  class SharedRateLimitStore {
    // The plugin constructs a store with its options; a child is made with its route's key prefix.
    constructor(
      _options?: unknown,
      private readonly keyPrefix = prefix
    ) {}

    incr(key: string, callback: Callback, timeWindow: number): void {
      const fallback = (): void => callback(null, local.incr(key, timeWindow))
      if (!shared.available()) return fallback()
      shared.redis
        .eval(INCR_WINDOW, 1, `${this.keyPrefix}${key}`, String(timeWindow))
        .then((result) => {
          const [current, ttl] = result as [number, number]
          callback(null, { current, ttl })
        })
        .catch(fallback)
    }

    child(routeOptions: { routeInfo: { method: string; url: string } }): SharedRateLimitStore {
      return new SharedRateLimitStore(undefined, `${this.keyPrefix}${routeOptions.routeInfo.method}${routeOptions.routeInfo.url}:`)
    }
  }
  return SharedRateLimitStore as unknown as FastifyRateLimitStoreCtor
}

/** Whether this replica makes a summary, or another one is making it. */
export type FlightRole = 'leader' | 'follower' | 'alone'

/**
 * Summaries in flight across replicas: the first to take a key's lock makes the call; the others wait
 * for its summary in the shared cache. The lock expires, so a replica that dies frees it.
 */
export interface SharedFlight {
  acquire(key: string, ttlMs: number): Promise<FlightRole>
  /** Whether some replica still holds the key's lock. */
  held(key: string): Promise<boolean>
  release(key: string): Promise<void>
}

/** Where a summary's lock in flight is kept: this prefix and the summary's cache key. */
export const FLIGHT_PREFIX = 'cg:flight:'

/** Deletes the locks of these summaries (a deleted session's): they hold a replica's token only, and expire anyway. */
export async function dropFlights(shared: SharedState, keys: readonly string[], prefix = FLIGHT_PREFIX): Promise<void> {
  if (keys.length === 0 || !shared.available()) return
  await shared.redis.del(...keys.map((k) => `${prefix}${k}`))
}

export function redisFlight(shared: SharedState, token: string, prefix = FLIGHT_PREFIX): SharedFlight {
  return {
    async acquire(key, ttlMs) {
      if (!shared.available()) return 'alone'
      try {
        const taken = await shared.redis.set(`${prefix}${key}`, token, 'PX', ttlMs, 'NX')
        return taken === 'OK' ? 'leader' : 'follower'
      } catch {
        return 'alone'
      }
    },
    async held(key) {
      if (!shared.available()) return false
      try {
        return (await shared.redis.exists(`${prefix}${key}`)) === 1
      } catch {
        return false
      }
    },
    async release(key) {
      if (!shared.available()) return
      // Only the holder's own lock is deleted (it may have expired and been taken by another since).
      await shared.redis
        .eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end", 1, `${prefix}${key}`, token)
        .catch(() => undefined)
    }
  }
}
