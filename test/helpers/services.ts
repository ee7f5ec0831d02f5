import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Redis } from 'ioredis'
import { TcpProxy } from './tcp-proxy.js'

/** The machine's PostgreSQL and Redis, where tests that need them find them (override with these variables). */
export const PG_URL = process.env.COMPACT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
export const REDIS_URL = process.env.COMPACT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

async function probePostgres(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 1_500 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    return undefined
  } catch (err) {
    return `PostgreSQL not reachable at ${PG_URL.replace(/\/\/[^@]*@/, '//')} (${(err as Error).message})`
  } finally {
    await client.end().catch(() => undefined)
  }
}

async function probeRedis(): Promise<string | undefined> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    connectTimeout: 1_500,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false
  })
  redis.on('error', () => undefined)
  try {
    await redis.connect()
    await redis.ping()
    return undefined
  } catch (err) {
    return `Redis not reachable at ${REDIS_URL} (${(err as Error).message})`
  } finally {
    redis.disconnect()
  }
}

/** Why PostgreSQL tests cannot run here, or undefined when they can; said once, in one line. */
export const pgMissing = await probePostgres()
export const redisMissing = await probeRedis()
if (pgMissing) console.warn(`skipped: ${pgMissing}`)
if (redisMissing) console.warn(`skipped: ${redisMissing}`)

/** A COMPACT_DB URL whose tables live in a schema of their own (dropped by dropSchemas). */
export function freshPgUrl(): string {
  const schema = `cg_test_${randomBytes(6).toString('hex')}`
  made.push(schema)
  return `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`
}
const made: string[] = []

export async function dropSchemas(): Promise<void> {
  if (made.length === 0) return
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  for (const schema of made.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await client.end()
}

/** A fresh PostgreSQL schema reached through a TCP relay the test can take down: its COMPACT_DB URL and the relay. */
export async function pgBehindRelay(): Promise<{ url: string; relay: TcpProxy }> {
  const target = new URL(PG_URL)
  const relay = await new TcpProxy(target.hostname, Number(target.port || 5432)).up()
  const url = new URL(freshPgUrl())
  url.host = `127.0.0.1:${relay.port}`
  return { url: url.toString(), relay }
}

/** A Redis key prefix no other test uses. */
export function freshRedisPrefix(): string {
  return `cg-test-${randomBytes(6).toString('hex')}:`
}
