import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { BEAT, READY, READY_AT, SLOTS, STALE_BEAT_MS, STALE_READY_MS, probeAnswer } from '../../src/server/probe-state.js'
import { testApp } from '../helpers/app.js'
import { tempDb } from '../helpers/process.js'

/**
 * The probes' own listener (COMPACT_PROBE_PORT), in a thread of its own: it answers `/healthz`, `/readyz` and
 * `/metrics` from what the main thread shares (its heartbeat, its last readiness check, its last metrics), so
 * that a main loop busy with a flood of bodies does not hold them up; a main loop that stopped beating is not
 * live, a readiness not checked lately is not ready.
 */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

describe('the probe listener', () => {
  it('answers the probes on a port of its own, as the main listener does, and nothing else', async () => {
    const app = await testApp({ COMPACT_DB: tempDb(), COMPACT_PROBE_PORT: '0', HOST: '127.0.0.1' })
    opened.push(app)
    await app.listen({ port: 0, host: '127.0.0.1' })
    expect(app.probePort).toBeGreaterThan(0)
    expect(app.probePort).not.toBe((app.server.address() as AddressInfo).port)
    const probe = `http://127.0.0.1:${app.probePort}`
    expect(await (await fetch(`${probe}/healthz`)).json()).toEqual({ status: 'ok' })
    const main = (await app.inject({ method: 'GET', url: '/readyz' })).json()
    // (the first check runs as the server starts: wait for its answer to reach the thread)
    let ready: unknown
    for (let i = 0; i < 200 && (ready as { status?: string } | undefined)?.status !== 'ready'; i++) {
      ready = await (await fetch(`${probe}/readyz`)).json()
      if ((ready as { status: string }).status !== 'ready') await new Promise((r) => setTimeout(r, 25))
    }
    expect(ready).toEqual(main)
    let metrics = ''
    for (let i = 0; i < 200 && !metrics.includes('compaction_'); i++) {
      metrics = await (await fetch(`${probe}/metrics`)).text()
      if (!metrics.includes('compaction_')) await new Promise((r) => setTimeout(r, 25))
    }
    expect(metrics).toContain('# TYPE compaction_')
    expect((await fetch(`${probe}/v1/sessions`)).status).toBe(404)
    expect((await fetch(`${probe}/healthz`, { method: 'POST' })).status).toBe(405)
  })

  it('is not started without COMPACT_PROBE_PORT', async () => {
    const app = await testApp()
    opened.push(app)
    await app.ready()
    expect(app.probePort).toBeUndefined()
  })
})

describe("the probe listener's answers", () => {
  const state = (beat: number, ready: number, readyAt: number): Parameters<typeof probeAnswer>[0] => {
    const times = new Float64Array(SLOTS)
    times[BEAT] = beat
    times[READY] = ready
    times[READY_AT] = readyAt
    return { times, metrics: 'm 1\n', keys: 'not wrapped (no COMPACT_MASTER_KEY)' }
  }
  const now = 1_000_000

  it('says the process is live while the main loop beats, stalled once it has stopped for longer than the limit', () => {
    expect(probeAnswer(state(now - 600, 1, now), 'GET', '/healthz', now).status).toBe(200)
    expect(probeAnswer(state(now - STALE_BEAT_MS - 1, 1, now), 'GET', '/healthz', now)).toMatchObject({ status: 503, body: '{"status":"stalled"}' })
  })

  it('says ready only on a fresh check that wrote the store', () => {
    expect(probeAnswer(state(now, 1, now - 1_000), 'GET', '/readyz', now).status).toBe(200)
    expect(JSON.parse(probeAnswer(state(now, 0, now - 1_000), 'GET', '/readyz', now).body)).toMatchObject({ status: 'not_ready' })
    expect(JSON.parse(probeAnswer(state(now, 1, now - STALE_READY_MS - 1), 'GET', '/readyz', now).body)).toMatchObject({
      status: 'not_ready',
      checks: { store: 'not checked lately' }
    })
  })
})
