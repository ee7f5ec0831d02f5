/**
 * `npm run bench` (proxy overhead): Claude Code's recorded request bodies sent through the gateway's
 * /v1/messages and through a bare relay (undici piping the same bytes to the same upstream, nothing else),
 * in turns, streamed answers; the gateway as `npm start` runs it, the relay and the upstream each in a
 * process of its own. Time to the first byte of the answer and to its end, as the median of each turn's
 * ratio of the gateway to the relay, and the CPU each spends a request. Target: ≤ 1.5x for both times.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join, resolve } from 'node:path'
import { Pool } from 'undici'
import { startGateway } from './servers.js'

const ROOT = resolve(import.meta.dirname, '..')
const ROUNDS = Number(process.env.BENCH_RELAY_ROUNDS ?? 600)
/**
 * Requests each server takes before any is timed. Both run for hours in use; until V8 has optimized the
 * gateway's path (some hundreds of requests here) its medians measure the compiler, not the proxy.
 */
const WARMUP = Number(process.env.BENCH_RELAY_WARMUP ?? 1_500)
const FIXTURES = ['2.1.332-first.json', '2.1.332-mid-system.json']

/** CPU time a process has used, all its threads (utime + stime from /proc), in ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1_000) / 100 // clock ticks of 10 ms
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? 0
}

/** A relay with no logic: the request's bytes piped upstream, the answer's piped back. */
export function bareRelay(upstream: string): import('node:http').Server {
  const pool = new Pool(upstream, { connections: 16 })
  return createServer((req, res) => {
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
}

/** A script's server in a process of its own (from the sources, as the bench's helpers are), and its URL once it listens. */
async function serverProcess(script: string): Promise<{ url: string; pid: number; stop: () => Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  const url = await new Promise<string>((res, rej) => {
    child.stdout!.on('data', (d: Buffer) => {
      const m = /url (http:\S+)/.exec(d.toString())
      if (m) res(m[1]!)
    })
    child.once('exit', () => rej(new Error('a bench server exited before it listened')))
  })
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM')
      await new Promise((r) => child.once('exit', r))
    }
  }
}

/**
 * Processes pinned to cores, every thread of theirs (taskset): the two servers measured share one core, so
 * that neither is measured on the less busy one, and the client and the upstream have the other. Without it
 * the same build moved between 1.41x and 1.70x from one run to the next. Returns what was done, for the report.
 */
function pin(cores: Record<number, number[]>): string {
  if (availableParallelism() < 2) return 'not pinned: one core'
  try {
    for (const [core, pids] of Object.entries(cores)) for (const pid of pids) execFileSync('taskset', ['-a', '-p', '-c', core, String(pid)], { stdio: 'ignore' })
    return 'the two servers pinned to one core, the client and the upstream to another'
  } catch {
    return 'not pinned: taskset failed'
  }
}

/** The loopback Messages API both relay to, in its own process; it keeps no request (its list would only grow). */
const UPSTREAM = `import('./test/helpers/fake-anthropic.ts').then(async ({ FakeAnthropic }) => {
  const fake = new FakeAnthropic()
  fake.checks = false
  fake.fallback = { text: 'A streamed answer of a few events, as the model gives it.' }
  await fake.start()
  setInterval(() => { fake.requests.length = 0 }, 200)
  console.log('url ' + fake.url)
})`

const RELAY = (upstream: string): string => `import('./bench/relay.ts').then(({ bareRelay }) => {
  const s = bareRelay(${JSON.stringify(upstream)}).listen(0, '127.0.0.1', () => console.log('url http://127.0.0.1:' + s.address().port))
})`

/** One request: milliseconds to the answer's first byte and to its end. */
async function timed(pool: Pool, body: Buffer): Promise<[number, number]> {
  const t0 = performance.now()
  const res = await pool.request({ method: 'POST', path: '/v1/messages?beta=true', headers: { 'content-type': 'application/json', 'x-api-key': 'gw-bench-relay-key', 'anthropic-version': '2023-06-01' }, body })
  let first = 0
  for await (const _chunk of res.body) first ||= performance.now() - t0
  return [first, performance.now() - t0]
}

export async function relayBench(): Promise<void> {
  const fake = await serverProcess(UPSTREAM)
  const relay = await serverProcess(RELAY(fake.url))
  // The gateway as `npm start` runs it (built, logging at info), with a key of its own and the same upstream.
  const gateway = await startGateway({ ANTHROPIC_API_KEY: 'sk-ant-bench-relay', ANTHROPIC_BASE_URL: fake.url, COMPACT_API_KEYS: 'bench=gw-bench-relay-key', COMPACT_PRECOMPUTE_AT: 'off' }, process.env.GW_FLAGS ? process.env.GW_FLAGS.split(' ') : [])
  const pinned = pin({ 0: [process.pid, fake.pid], 1: [relay.pid, gateway.child.pid!] })
  const bodies = FIXTURES.map((f) => Buffer.from(JSON.stringify({ ...JSON.parse(readFileSync(join(ROOT, 'test/fixtures/claude-code', f), 'utf8')), stream: true })))
  const clients = { relay: new Pool(relay.url, { connections: 1 }), gateway: new Pool(gateway.url, { connections: 1 }) }
  let cpuPerRequest = { relay: 0, gateway: 0 }
  const times = { relay: { first: [] as number[], total: [] as number[] }, gateway: { first: [] as number[], total: [] as number[] } }
  try {
    for (let i = 0; i < WARMUP / bodies.length; i++) for (const body of bodies) await Promise.all([timed(clients.relay, body), timed(clients.gateway, body)])
    const cpu0 = { relay: cpuMs(relay.pid), gateway: cpuMs(gateway.child.pid!) }
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
    cpuPerRequest = { relay: (cpuMs(relay.pid) - cpu0.relay) / (ROUNDS * bodies.length), gateway: (cpuMs(gateway.child.pid!) - cpu0.gateway) / (ROUNDS * bodies.length) }
  } finally {
    await clients.relay.close()
    await clients.gateway.close()
    await gateway.stop()
    await relay.stop()
    await fake.stop()
  }
  const rows = (['first', 'total'] as const).map((k) => {
    const bare = median(times.relay[k])
    const ours = median(times.gateway[k])
    // Each gateway request beside the relay's request of the same turn: the machine's drift over the run
    // (two cores shared by four processes) moves both alike, so the median of these ratios holds still
    // where the ratio of the two medians moved by a third between runs.
    const paired = median(times.gateway[k].map((t, i) => t / times.relay[k][i]!))
    return { k, bare, ours, ratio: paired }
  })
  console.log(`\nproxy overhead: Claude Code's recorded bodies (${bodies.map((b) => `${Math.round(b.length / 1024)} KiB`).join(', ')}), streamed, ${ROUNDS} rounds in turns after ${WARMUP} requests each, every server in its own process (${pinned}), against a bare undici relay`)
  console.log(`CPU per request (all threads): gateway ${cpuPerRequest.gateway.toFixed(3)} ms, relay ${cpuPerRequest.relay.toFixed(3)} ms, ${(cpuPerRequest.gateway / cpuPerRequest.relay).toFixed(2)}x`)
  for (const r of rows) {
    console.log(`target: ${r.k === 'first' ? 'time to first byte' : 'total time'} ≤ 1.5x the bare relay: ${r.ratio.toFixed(2)}x (median of each turn's ratio; medians ${r.ours.toFixed(2)} ms vs ${r.bare.toFixed(2)} ms), ${r.ratio <= 1.5 ? 'meets' : 'misses'}`)
  }
}
