import fp from 'fastify-plugin'
import { type Metrics, createMetrics, initializeSeries } from '../../telemetry/metrics.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** This app's registry and metrics (tests build many apps, each with its own). */
    metrics: Metrics
  }
}

/** The metrics, every known series created at 0. */
export const metricsPlugin = fp<{ modelKind?: 'anthropic' | 'openai' | 'gemini' }>(
  async (app, { modelKind }) => {
    const metrics = createMetrics()
    initializeSeries(metrics, modelKind)
    app.decorate('metrics', metrics)
  },
  { name: 'metrics' }
)
