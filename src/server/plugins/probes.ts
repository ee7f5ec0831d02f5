import fp from 'fastify-plugin'
import type { Worker } from 'node:worker_threads'
import { startThread } from '../../threads/entry.js'
import { BEAT, BEAT_MS, READY, READY_AT, READY_CHECK_MS, SLOTS } from '../probe-state.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The port the probes' own listener took (COMPACT_PROBE_PORT; 0 asks for any); undefined without one. */
    probePort: number | undefined
  }
}

/** How often the metrics the probe listener serves are rendered again. */
const METRICS_MS = 5_000

export interface ProbesOptions {
  host: string
  /** COMPACT_PROBE_PORT; none: the probes are answered on the main listener alone. */
  port?: number
  /** What `/readyz` says of the session keys' wrapping. */
  keys: string
}

/**
 * `/healthz`, `/readyz` and `/metrics` on a listener of their own, in a thread of their own
 * (probe-thread.ts), where a flood of bodies on the main listener cannot hold them up; the main thread beats,
 * checks the store and renders the metrics for it at intervals. The main listener answers them too.
 */
export const probesPlugin = fp<ProbesOptions>(
  async (app, { host, port, keys }) => {
    app.decorate('probePort', undefined)
    if (port === undefined) return
    const shared = new SharedArrayBuffer(SLOTS * Float64Array.BYTES_PER_ELEMENT)
    const times = new Float64Array(shared)
    const timers: NodeJS.Timeout[] = []
    let thread: Worker | undefined
    const every = (ms: number, work: () => void): void => {
      work()
      const timer = setInterval(work, ms)
      timer.unref()
      timers.push(timer)
    }
    let checking = false
    const check = (): void => {
      if (checking) return
      checking = true
      app.store
        .checkWritable()
        .then(
          () => 1,
          () => 0
        )
        .then((ready) => {
          times[READY] = ready
          times[READY_AT] = Date.now()
        })
        .finally(() => (checking = false))
    }
    const render = (): void => {
      void app.metrics.registry.metrics().then(
        (metrics) => thread?.postMessage({ metrics }),
        () => undefined
      )
    }
    app.addHook('onReady', async () => {
      every(BEAT_MS, () => (times[BEAT] = Date.now()))
      const started = startThread(import.meta.url, '../probe-thread', { workerData: { host, listen: port, shared, keys } })
      thread = started
      started.unref()
      app.probePort = await new Promise<number>((resolve, reject) => {
        started.once('error', reject)
        started.on('message', (m: { listening?: number }) => {
          if (m.listening !== undefined) resolve(m.listening)
        })
      })
      started.on('error', (err) => app.log.error({ err }, 'the probe listener failed'))
      every(READY_CHECK_MS, check)
      every(METRICS_MS, render)
      app.log.info({ event: 'probes_listening', port: app.probePort }, `probes also at http://${host}:${app.probePort} (/healthz, /readyz, /metrics)`)
    })
    app.addHook('onClose', async () => {
      for (const t of timers) clearInterval(t)
      await thread?.terminate()
    })
  },
  { name: 'probes', dependencies: ['metrics'] }
)
