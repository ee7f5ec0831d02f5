import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { parsePrometheus, value } from '../helpers/prometheus.js'

const transcripts = loadTranscripts(FIXTURE_DIR)

async function scrape(app: App) {
  const res = await app.inject({ url: '/metrics' })
  expect(res.statusCode).toBe(200)
  expect(res.headers['content-type']).toContain('text/plain')
  return { text: res.body, samples: parsePrometheus(res.body) }
}

describe('/metrics after compactions (extractive)', () => {
  let app: App
  const stats: Record<string, number>[] = []
  beforeAll(async () => {
    app = await testApp()
    for (const t of transcripts) {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/compact',
        payload: { messages: t.messages, mode: 'manual', session_id: `secret-session-${t.name}` }
      })
      expect(res.statusCode).toBe(200)
      stats.push(res.json().stats)
    }
    await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: [user('a')] } }) // under budget
    await app.inject({ method: 'POST', url: '/v1/compact', payload: { nope: true } }) // 400
    await app.inject({ url: '/missing' }) // 404
  })
  afterAll(async () => {
    await app.close()
  })

  it("match the responses' stats", async () => {
    const { samples } = await scrape(app)
    const sum = (k: string) => stats.reduce((n, s) => n + s[k]!, 0)
    expect(value(samples, 'compaction_raw_history_tokens_sum')).toBe(sum('raw_history_tokens'))
    expect(value(samples, 'compaction_raw_history_tokens_count')).toBe(transcripts.length)
    expect(value(samples, 'compaction_summary_tokens_sum')).toBe(sum('summary_tokens'))
    expect(value(samples, 'compaction_compacted_turns_sum')).toBe(sum('compacted_turns'))
    expect(value(samples, 'compaction_context_after_tokens_sum')).toBe(sum('context_after_compaction'))
    expect(value(samples, 'compaction_context_after_tokens_bucket', { le: '+Inf' })).toBe(transcripts.length)
    expect(value(samples, 'compaction_requests_total', { mode: 'manual', outcome: 'manual' })).toBe(transcripts.length)
    expect(value(samples, 'compaction_requests_total', { mode: 'auto', outcome: 'under_budget' })).toBe(1)
    expect(value(samples, 'compaction_requests_total', { outcome: 'rejected' })).toBe(1)
    expect(value(samples, 'compaction_summarizer_calls_total', { kind: 'extractive', result: 'ok' })).toBe(transcripts.length)
    expect(value(samples, 'compaction_summarizer_duration_seconds_count', { kind: 'extractive' })).toBe(transcripts.length)
  })

  it('time HTTP requests by route template, never by raw URL', async () => {
    const { samples } = await scrape(app)
    expect(value(samples, 'http_request_duration_seconds_count', { method: 'POST', route: '/v1/compact', status_code: '200' })).toBe(transcripts.length + 1)
    expect(value(samples, 'http_request_duration_seconds_count', { method: 'POST', route: '/v1/compact', status_code: '400' })).toBe(1)
    expect(value(samples, 'http_request_duration_seconds_count', { route: 'unmatched', status_code: '404' })).toBe(1)
    expect(samples.some((s) => s.labels.route === '/missing')).toBe(false)
  })

  it('carry the process defaults and no session id, key or free text in any label', async () => {
    const { samples, text } = await scrape(app)
    expect(value(samples, 'process_cpu_user_seconds_total')).toBeGreaterThan(0)
    expect(samples.some((s) => s.name === 'nodejs_heap_size_used_bytes')).toBe(true)
    expect(text).not.toContain('secret-session')
    const allowed = new Set([
      'mode',
      'outcome',
      'format',
      'kind',
      'result',
      'direction',
      'method',
      'route',
      'status_code',
      'le',
      'quantile',
      'version',
      'major',
      'minor',
      'patch',
      'type',
      'space',
      'kind',
      'code',
      'operation',
      'endpoint',
      'compaction',
      'status',
      'source',
      'event'
    ])
    for (const s of samples) for (const k of Object.keys(s.labels)) expect(allowed.has(k), `${s.name}{${k}}`).toBe(true)
  })

  it('keep one registry per app', async () => {
    const other = await testApp()
    const { samples } = await scrape(other as App)
    expect(value(samples, 'compaction_raw_history_tokens_count')).toBe(0)
    await other.close()
  })
})

describe('/metrics for model summaries', () => {
  it('count calls, fallbacks and tokens as the responses report them', async () => {
    const fake = await new FakeAnthropic().start()
    const app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-test-metrics-000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_SUMMARIZER_TIMEOUT_MS: '3000',
      COMPACT_CACHE_TTL_S: '0'
    })
    const history = [user('fix it'), ...shellStep('a', 'make', 'ok'), assistant('done'), user('next')]
    const ok1 = (await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: history, mode: 'manual' } })).json()
    const ok2 = (await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: history, mode: 'manual' } })).json()
    fake.reply({ text: 'no tool' }, { text: 'still no tool' })
    const fell = (await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: history, mode: 'manual' } })).json()
    expect(fell.summarizer.fallback_reason).toBe('no_tool_call')
    const { samples } = await scrape(app)
    expect(value(samples, 'compaction_summarizer_calls_total', { kind: 'anthropic', result: 'ok' })).toBe(2)
    expect(value(samples, 'compaction_summarizer_calls_total', { kind: 'anthropic', result: 'no_tool_call' })).toBe(1)
    expect(value(samples, 'compaction_summarizer_calls_total', { kind: 'extractive', result: 'ok' })).toBe(1)
    expect(value(samples, 'compaction_summarizer_tokens_total', { direction: 'input' })).toBe(ok1.summarizer.input_tokens + ok2.summarizer.input_tokens)
    expect(value(samples, 'compaction_summarizer_tokens_total', { direction: 'output' })).toBe(ok1.summarizer.output_tokens + ok2.summarizer.output_tokens)
    await app.close()
    await fake.close()
  })
})
