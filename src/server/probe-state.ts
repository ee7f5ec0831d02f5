/**
 * What the probes' own listener (probe-thread.ts) answers, from what the main thread shares with it: the
 * times of its last heartbeat and of its last readiness check in a shared buffer, the metrics it last
 * rendered. Pure: the threads do the I/O.
 */

/** The shared buffer's slots: the main loop's last heartbeat (ms), its last readiness (1 ready, 0 not), when it was checked (ms). */
export const BEAT = 0
export const READY = 1
export const READY_AT = 2
export const SLOTS = 3

/** How often the main loop beats and checks the store. */
export const BEAT_MS = 500
export const READY_CHECK_MS = 2_000
/** A heartbeat older than this says the main loop is stuck: the process is not live. */
export const STALE_BEAT_MS = 10_000
/** A readiness check older than this is not trusted: not ready. */
export const STALE_READY_MS = 15_000

export interface ProbeShared {
  times: Float64Array
  metrics: string
  /** What `/readyz` says of the session keys' wrapping. */
  keys: string
}

export function probeAnswer(state: ProbeShared, method: string, path: string, now: number): { status: number; type: string; body: string } {
  const json = (status: number, value: unknown): { status: number; type: string; body: string } => ({
    status,
    type: 'application/json; charset=utf-8',
    body: JSON.stringify(value)
  })
  if (method !== 'GET' && method !== 'HEAD') return json(405, { type: 'error', error: { type: 'method_not_allowed', message: 'probes are read with GET' } })
  const beat = state.times[BEAT] ?? 0
  if (path === '/healthz') return now - beat <= STALE_BEAT_MS ? json(200, { status: 'ok' }) : json(503, { status: 'stalled' })
  if (path === '/readyz') {
    const fresh = now - (state.times[READY_AT] ?? 0) <= STALE_READY_MS
    const ready = fresh && state.times[READY] === 1
    return json(ready ? 200 : 503, {
      status: ready ? 'ready' : 'not_ready',
      checks: { store: ready ? 'ok' : fresh ? 'not writable (the server log says why)' : 'not checked lately', keys: state.keys }
    })
  }
  if (path === '/metrics') return { status: 200, type: 'text/plain; version=0.0.4; charset=utf-8', body: state.metrics }
  return json(404, { type: 'error', error: { type: 'not_found', message: 'the probe port serves /healthz, /readyz and /metrics' } })
}
