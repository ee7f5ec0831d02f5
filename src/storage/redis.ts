import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import { createRequire } from 'node:module'
import type { Redis } from 'ioredis'

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

/** A client of Redis at `url`; the driver is loaded here, so that a replica without Redis does not load it at its start. */
export async function connectRedis(url: string, events: RedisEvents): Promise<SharedState> {
  const target = parseRedisUrl(url)
  const { Redis } = await import('ioredis')
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

interface Counted {
  current: number
  ttl: number
}
type Callback = (err: Error | null, result?: Counted) => void

/** The plugin's own stores (its Redis one, and the one it keeps in memory), as their modules export them. */
interface PluginStore {
  incr(key: string, callback: Callback, timeWindow: number, max: number): void
  child(routeOptions: unknown): PluginStore
}
type RedisStoreCtor = new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key: string) => PluginStore
type LocalStoreCtor = new (continueExceeding: boolean, exponentialBackoff: boolean, cache?: number) => PluginStore
const require = createRequire(import.meta.url)
const PluginRedisStore = require('@fastify/rate-limit/store/RedisStore.js') as RedisStoreCtor
const PluginLocalStore = require('@fastify/rate-limit/store/LocalStore.js') as LocalStoreCtor

/** The options the plugin constructs a store with (the ones its own stores take). */
interface StoreOptions {
  continueExceeding?: boolean
  exponentialBackoff?: boolean
}

/**
 * A store for @fastify/rate-limit: the plugin's own Redis store, counting for every replica, and its own
 * in-memory store beside it, counting while Redis is down (each replica then limits on its own, as
 * without Redis) until Redis answers again.
 */
export function rateLimitStore(shared: SharedState, prefix = 'cg:rl:'): FastifyRateLimitStoreCtor {
  class SharedRateLimitStore {
    private readonly redis: PluginStore
    private readonly local: PluginStore

    // The plugin constructs a store with its options; a child is made with its route's options.
    constructor(options: StoreOptions = {}, stores?: { redis: PluginStore; local: PluginStore }) {
      const continueExceeding = options.continueExceeding ?? false
      const exponentialBackoff = options.exponentialBackoff ?? false
      this.redis = stores?.redis ?? new PluginRedisStore(continueExceeding, exponentialBackoff, shared.redis, prefix)
      this.local = stores?.local ?? new PluginLocalStore(continueExceeding, exponentialBackoff)
    }

    incr(key: string, callback: Callback, timeWindow: number, max: number): void {
      const fallback = (): void => this.local.incr(key, callback, timeWindow, max)
      if (!shared.available()) return fallback()
      this.redis.incr(key, (err, result) => (err ? fallback() : callback(null, result)), timeWindow, max)
    }

    child(routeOptions: unknown): SharedRateLimitStore {
      return new SharedRateLimitStore({}, { redis: this.redis.child(routeOptions), local: this.local.child(routeOptions) })
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
