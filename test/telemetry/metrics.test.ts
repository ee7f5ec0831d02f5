import { describe, expect, it } from 'vitest'
import { KNOWN_LABELS, createMetrics, initializeSeries } from '../../src/telemetry/metrics.js'

describe('metrics', () => {
  it('has a registry of its own, so that two apps do not share series', async () => {
    const a = createMetrics()
    const b = createMetrics()
    a.requests.inc({ mode: 'auto', outcome: 'over_budget' })
    expect(await a.registry.getSingleMetricAsString('compaction_requests_total')).toContain('outcome="over_budget"} 1')
    expect(await b.registry.getSingleMetricAsString('compaction_requests_total')).not.toContain('over_budget"} 1')
  })

  it('creates every series that can happen at 0 before its first event, and none that cannot', async () => {
    const metrics = createMetrics()
    initializeSeries(metrics)
    const text = await metrics.registry.metrics()
    const cannot = { manual: ['over_budget', 'under_budget', 'disabled', 'cache_lapsed'], auto: ['manual'] }
    for (const mode of KNOWN_LABELS.modes) {
      for (const outcome of KNOWN_LABELS.outcomes) {
        for (const format of KNOWN_LABELS.formats) {
          const series = `compaction_requests_total{mode="${mode}",outcome="${outcome}",format="${format}"} 0`
          if ((cannot[mode] as readonly string[]).includes(outcome)) expect(text).not.toContain(series)
          else expect(text).toContain(series)
        }
      }
    }
    for (const operation of KNOWN_LABELS.storeOperations) expect(text).toContain(`compaction_store_errors_total{operation="${operation}"} 0`)
    expect(text).toContain('compaction_summary_cache_total{result="hit"} 0')
  })
})
