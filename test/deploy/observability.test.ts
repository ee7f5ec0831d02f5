import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { buildApp } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'
import { testApp } from '../helpers/app.js'
import { assistant, user } from '../helpers/history.js'
import { ROOT } from '../helpers/process.js'
import { parsePrometheus } from '../helpers/prometheus.js'

/** Metric names in PromQL: every identifier that is a served family, or a family's _bucket/_count/_sum. */
function metricNames(expr: string): string[] {
  return [...new Set(expr.match(/\b(?:compaction|http)_[a-z_]+/g) ?? [])].map((n) => n.replace(/_(?:bucket|count|sum)$/, ''))
}

async function servedFamilies(): Promise<Set<string>> {
  const app = await testApp()
  const text = (await app.inject({ url: '/metrics' })).body
  await app.close()
  return new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!))
}

describe('the operator view', () => {
  it('alert rules and the dashboard name only metrics /metrics serves, and each rule has a summary', async () => {
    const served = await servedFamilies()
    const rules = (
      parse(readFileSync(join(ROOT, 'deploy/prometheus/alerts.yml'), 'utf8')) as {
        groups: { rules: { alert: string; expr: string; annotations: { summary: string } }[] }[]
      }
    ).groups.flatMap((g) => g.rules)
    expect(rules.map((r) => r.alert).sort()).toEqual(['CompactionModelFallingBack', 'CompactionSaturated', 'CompactionServerErrors', 'CompactionStoreErrors'])
    for (const r of rules) {
      expect(r.annotations.summary.length).toBeGreaterThan(10)
      for (const name of metricNames(r.expr)) expect(served, `${r.alert}: ${name}`).toContain(name)
    }
    const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/compaction-gateway.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[]
    }
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr))
    expect(exprs.length).toBeGreaterThan(10)
    for (const e of exprs) for (const name of metricNames(e)) expect(served, name).toContain(name)
  })

  it('serves every labelled series from the start, at 0, and saturation gauges', async () => {
    const app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-test-000000000000', ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' })
    const samples = parsePrometheus((await app.inject({ url: '/metrics' })).body)
    const has = (name: string, labels: Record<string, string>) =>
      samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    expect(has('compaction_requests_total', { mode: 'auto', outcome: 'over_budget' })).toBe(true)
    expect(has('compaction_requests_total', { mode: 'manual', outcome: 'overloaded' })).toBe(true)
    expect(has('compaction_summarizer_calls_total', { kind: 'anthropic', result: 'timeout' })).toBe(true)
    expect(has('compaction_store_errors_total', { operation: 'memory_write' })).toBe(true)
    expect(has('compaction_summary_cache_total', { result: 'hit' })).toBe(true)
    expect(samples.find((s) => s.name === 'compaction_summaries_in_flight')?.value).toBe(0)
    expect(samples.find((s) => s.name === 'compaction_summaries_queued')?.value).toBe(0)
    // token buckets are dense around the budgets clients use
    const buckets = samples.filter((s) => s.name === 'compaction_context_after_tokens_bucket').map((s) => s.labels.le)
    for (const le of ['30000', '40000', '45000', '50000', '60000', '80000', '100000']) expect(buckets).toContain(le)
    await app.close()
  })

  it('logs a refused request with its reason and path, keeps probes quiet at info, and names the summary in context_compacted', async () => {
    const lines: string[] = []
    const stream = new PassThrough()
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)))
    const app = await buildApp({ config: loadConfig({ COMPACT_DB: ':memory:', LOG_LEVEL: 'info' }), logStream: stream })
    await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: [{ role: 'user', content: [{ type: 'text' }] }] } })
    for (const url of ['/healthz', '/readyz', '/metrics']) await app.inject({ url })
    const ok = await app.inject({ method: 'POST', url: '/v1/compact', payload: { mode: 'manual', messages: [user('a'), assistant('b'), user('c')] } })
    await app.close()
    await new Promise((r) => setImmediate(r))
    const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(events.find((e) => e.event === 'request_refused')).toMatchObject({
      status: 400,
      error_type: 'invalid_request_error',
      path: '/messages/0/content/0',
      reason: expect.stringContaining('text')
    })
    expect(events.filter((e) => /\/(healthz|readyz|metrics)/.test(JSON.stringify(e.req ?? '')))).toEqual([])
    expect(events.find((e) => e.event === 'context_compacted')).toMatchObject({ summary_id: ok.json().summary.id })
  })
})
