/**
 * `npm run bench` (proxy overhead): Claude Code's recorded request bodies sent through the gateway's
 * /v1/messages and through a bare relay (undici piping the same bytes to the same upstream, nothing else),
 * in turns, streamed answers. Time to the first byte of the answer and to its end, medians, as ratios of the
 * gateway to the relay. Target: ≤ 1.5x for both.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { Pool } from 'undici'
import { buildApp } from '../src/server/app.js'
import { loadConfig } from '../src/server/config.js'
import { FakeAnthropic } from '../test/helpers/fake-anthropic.js'

const ROUNDS = Number(process.env.BENCH_RELAY_ROUNDS ?? 150)
const FIXTURES = ['2.1.332-first.json', '2.1.332-mid-system.json']

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? 0
}

/** A relay with no logic: the request's bytes piped upstream, the answer's piped back. */
async function bareRelay(upstream: string): Promise<{ url: string; close: () => Promise<void> }> {
  const pool = new Pool(upstream, { connections: 16 })
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      pool
        .request({ method: 'POST', path: req.url ?? '/', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-bench-relay', 'anthropic-version': '2023-06-01' }, body: Buffer.concat(chunks) })
        .then((up) => {
          res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json') })
          up.body.pipe(res)
        })
        .catch(() => {
          res.writeHead(502).end()
        })
    })
  })
  server.listen(0, '127.0.0.1')
  await new Promise((r) => server.once('listening', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      await new Promise((r) => server.close(r))
      await pool.close()
    }
  }
}

/** One request: milliseconds to the answer's first byte and to its end. */
async function timed(pool: Pool, body: Buffer): Promise<[number, number]> {
  const t0 = performance.now()
  const res = await pool.request({ method: 'POST', path: '/v1/messages?beta=true', headers: { 'content-type': 'application/json', 'x-api-key': 'gw-bench-relay-key', 'anthropic-version': '2023-06-01' }, body })
  let first = 0
  for await (const _chunk of res.body) first ||= performance.now() - t0
  return [first, performance.now() - t0]
}

export async function relayBench(): Promise<void> {
  const fake = await new FakeAnthropic().start()
  fake.checks = false // the same upstream for both; its own checks would only add to both sides
  fake.fallback = { text: 'A streamed answer of a few events, as the model gives it.' }
  const relay = await bareRelay(fake.url)
  const app = await buildApp({
    config: loadConfig({ ANTHROPIC_API_KEY: 'sk-ant-bench-relay', ANTHROPIC_BASE_URL: fake.url, COMPACT_API_KEYS: 'bench=gw-bench-relay-key', COMPACT_DB: ':memory:', COMPACT_PRECOMPUTE_AT: 'off' }),
    logger: false
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const gateway = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const bodies = FIXTURES.map((f) => Buffer.from(JSON.stringify({ ...JSON.parse(readFileSync(join(import.meta.dirname, '..', 'test/fixtures/claude-code', f), 'utf8')), stream: true })))
  const clients = { relay: new Pool(relay.url, { connections: 1 }), gateway: new Pool(gateway, { connections: 1 }) }
  const times = { relay: { first: [] as number[], total: [] as number[] }, gateway: { first: [] as number[], total: [] as number[] } }
  try {
    for (let i = 0; i < 20; i++) for (const body of bodies) await Promise.all([timed(clients.relay, body), timed(clients.gateway, body)])
    for (let i = 0; i < ROUNDS; i++) {
      for (const body of bodies) {
        // in turns, the order swapped each round, so neither gets the warmer machine
        const order = i % 2 === 0 ? (['relay', 'gateway'] as const) : (['gateway', 'relay'] as const)
        for (const who of order) {
          const [first, total] = await timed(clients[who], body)
          times[who].first.push(first)
          times[who].total.push(total)
        }
      }
    }
  } finally {
    await clients.relay.close()
    await clients.gateway.close()
    await app.close()
    await relay.close()
    await fake.close()
  }
  const rows = (['first', 'total'] as const).map((k) => {
    const bare = median(times.relay[k])
    const ours = median(times.gateway[k])
    return { k, bare, ours, ratio: ours / bare }
  })
  console.log(`\nproxy overhead: Claude Code's recorded bodies (${bodies.map((b) => `${Math.round(b.length / 1024)} KiB`).join(', ')}), streamed, ${ROUNDS} rounds in turns, against a bare undici relay`)
  for (const r of rows) {
    console.log(`target: ${r.k === 'first' ? 'time to first byte' : 'total time'} ≤ 1.5x the bare relay: ${r.ours.toFixed(2)} ms vs ${r.bare.toFixed(2)} ms, ${r.ratio.toFixed(2)}x, ${r.ratio <= 1.5 ? 'meets' : 'misses'}`)
  }
}
