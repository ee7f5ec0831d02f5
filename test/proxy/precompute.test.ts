import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Message, promptTokens, validateHistory } from '../../src/compaction/index.js'
import { type App, buildApp } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'
import { capturedLog, testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { until } from '../helpers/wait.js'

const GATEWAY_KEY = 'gw-precompute-key-1'
const BUDGET = 10_000
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')

/** The history of one session after `steps` steps: each step a shell call, its output and a new request. */
function grow(steps: number, tag = 'p'): Message[] {
  const messages: Message[] = [user(`Migrate the config loader in src/config_${tag}.ts to the new schema`)]
  for (let i = 0; i < steps; i++) {
    messages.push(...shellStep(`toolu_${tag}_${i}`, `sed -n 1,80p src/part_${tag}_${i}.ts`, `part ${i}: ${'y'.repeat(1_600)}`))
    messages.push(assistant(`Read part ${i}.`), user(`Continue with part ${i + 1}`))
  }
  return messages
}

/** The fewest steps whose history is at least `share` of the budget. */
function stepsFor(share: number): number {
  let n = 1
  while (promptTokens(grow(n), undefined, undefined) < share * BUDGET) n++
  return n
}

async function counter(app: App, name: string, labels: string): Promise<number> {
  const text = await app.metrics.registry.getSingleMetricAsString(name)
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`))
  return Number(line?.split(' ').at(-1) ?? 0)
}

const sources = async (app: App): Promise<{ precomputed: number; merged: number }> => ({
  precomputed: await counter(app, 'compaction_proxy_compactions_total', 'source="precomputed"'),
  merged: await counter(app, 'compaction_proxy_compactions_total', 'source="merged"')
})

describe('summaries written ahead: only near the crossing, taken at it, never waited for', () => {
  let fake: FakeAnthropic
  let app: App
  let sdk: Anthropic
  let summaries = 0

  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    // The model takes its time over a summary; the proxied calls answer at once.
    fake.fallback = (r) =>
      isSummaryCall(r) ? { delayMs: 300, toolInput: { objective: `Migrate the config loader (summary ${++summaries})` } } : { text: 'ok' }
    app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-upstream-precompute-000000',
      COMPACT_PROXY_SUMMARIES: 'gateway',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `bob=${GATEWAY_KEY}`,
      COMPACT_PRECOMPUTE_AT: '0.5'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    sdk = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  })
  afterAll(async () => {
    await app.close()
    await fake.close()
  })

  const send = (messages: Message[], session = 'session-precompute-1') =>
    sdk.messages
      .create(
        { model: 'claude-test', max_tokens: 16, messages: messages as Anthropic.MessageParam[], metadata: { user_id: session } },
        { headers: { 'x-compaction-budget': String(BUDGET) } }
      )
      .withResponse()

  it('begins the summary only when the growth seen says the crossing is near, takes it at the crossing, and begins no other at once', async () => {
    const over = stepsFor(1.0)
    // A step a request: past half the budget nothing is written while the crossing is more than three requests away.
    let steps = stepsFor(0.55)
    for (const s of [steps - 2, steps - 1, steps]) expect((await send(grow(s))).response.headers.get('x-compaction')).toBe('none')
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')).toBe(0)
    while (steps < over && (await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')) === 0) {
      steps++
      expect((await send(grow(steps))).response.headers.get('x-compaction')).toBe('none')
    }
    // begun within three requests' growth of the budget, and only then
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')).toBe(1)
    expect(over - steps).toBeLessThanOrEqual(4)
    await until('the summary written ahead', async () => (await counter(app, 'compaction_proxy_precomputes_total', 'event="done"')) === 1)

    while (steps < over + 5) {
      steps++
      const { response } = await send(grow(steps))
      if (response.headers.get('x-compaction') === 'compacted') break
    }
    const crossing = grow(steps)
    const sent = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    const messages = sent.body.messages as unknown as Message[]
    expect(validateHistory(messages)).toBeUndefined()
    expect(messages.at(-1)).toEqual(crossing.at(-1))
    expect(JSON.stringify(messages[0])).toContain('(summary 1)')
    expect(promptTokens(messages, undefined, undefined)).toBeLessThanOrEqual(BUDGET)
    expect((await sources(app)).precomputed + (await sources(app)).merged).toBe(1)
    // and its figures are those of what was forwarded, not of the history the summary was written from
    const after = await app.metrics.registry.getSingleMetricAsString('compaction_context_after_tokens')
    const sum = Number(
      after
        .split('\n')
        .find((l) => l.startsWith('compaction_context_after_tokens_sum'))
        ?.split(' ')
        .at(-1)
    )
    expect(sum).toBe(promptTokens(messages, undefined, undefined))
    // the crossing's wait is measured
    expect(await app.metrics.registry.getSingleMetricAsString('compaction_crossing_wait_seconds')).toContain('compaction_crossing_wait_seconds_count 1')

    // Right after the crossing the context is half the room from the next: nothing is written ahead yet.
    const { response } = await send(grow(steps + 1))
    expect(response.headers.get('x-compaction')).toBe('compacted')
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')).toBe(1)
    expect(fake.requests.filter(isSummaryCall)).toHaveLength(1)
  })

  it('with a summary model that never answers, forwards every crossing at once, and the summaries improve once it answers', async () => {
    let release!: () => void
    const answered = new Promise<void>((resolve) => (release = resolve))
    let model = 0
    fake.fallback = (r) => (isSummaryCall(r) ? { after: answered, toolInput: { objective: `Migrate the config loader (model ${++model})` } } : { text: 'ok' })
    const session = 'session-never-answers'
    const before = await sources(app)
    const calls = fake.requests.filter(isSummaryCall).length
    const kept = async (): Promise<number> =>
      (await counter(app, 'compaction_proxy_precomputes_total', 'event="late"')) + (await counter(app, 'compaction_proxy_precomputes_total', 'event="done"'))
    const keptBefore = await kept()
    // Turns back to back through three crossings while the model has answered nothing.
    let steps = 1
    let crossings = 0
    while (crossings < 3 && steps < 200) {
      const { response, data } = await send(grow(steps++, 'n'), session)
      expect(data.content).toEqual([{ type: 'text', text: 'ok' }])
      const sent = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
      expect(promptTokens(sent.body.messages as unknown as Message[], undefined, undefined)).toBeLessThanOrEqual(BUDGET)
      if (response.headers.get('x-compaction') === 'compacted' && JSON.stringify(sent.body.messages[0]).includes('compaction-summary')) {
        const after = await sources(app)
        if (after.merged + after.precomputed > before.merged + before.precomputed + crossings) crossings++
      }
    }
    expect(crossings).toBe(3)
    // every crossing forwarded before the model answered anything; one summary call in flight, not one a crossing
    expect(fake.requests.filter(isSummaryCall).length - calls).toBe(1)
    const merged = (await sources(app)).merged - before.merged
    expect(merged).toBe(3)
    const forwarded = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    expect(JSON.stringify(forwarded.body.messages[0])).not.toContain('(model 1)')

    // The model answers: its summary is the base of the next crossing, whose summary turn carries it.
    release()
    await until('the late summary kept', async () => (await kept()) > keptBefore)
    const crossed = (await sources(app)).merged + (await sources(app)).precomputed
    while (steps < 400 && (await sources(app)).merged + (await sources(app)).precomputed === crossed) await send(grow(steps++, 'n'), session)
    const next = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    expect(validateHistory(next.body.messages as unknown as Message[])).toBeUndefined()
    expect(JSON.stringify(next.body.messages[0])).toMatch(/\(model \d\)/)
  })
})

describe('a summary model that never answers at all', () => {
  it('keeps no shutdown waiting: the summary in flight is given up when the gateway closes', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = (r) => (isSummaryCall(r) ? { after: new Promise(() => undefined) } : { text: 'ok' })
    const app = await testApp({
      ANTHROPIC_API_KEY: 'sk-ant-upstream-precompute-000000',
      COMPACT_PROXY_SUMMARIES: 'gateway',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_PRECOMPUTE_AT: '0.5'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const client = new Anthropic({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
    let steps = 1
    while (!fake.requests.some(isSummaryCall) && steps < 100) {
      await client.messages.create(
        { model: 'claude-test', max_tokens: 16, messages: grow(steps++, 'c') as Anthropic.MessageParam[] },
        { headers: { 'x-compaction-budget': String(BUDGET) } }
      )
    }
    expect(fake.requests.some(isSummaryCall)).toBe(true)
    await app.close() // resolves: the test's own time limit is what a hung close would fail on
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="done"')).toBe(0)
    await fake.close()
  })
})

describe('a summary model that fails the summaries written ahead', () => {
  it('is warned of at LOG_LEVEL=warn, with its kind, once a burst, though no compaction waits for it', async () => {
    const fake = await new FakeAnthropic().start()
    // the model is rate limited: every summary call answers 429 (retried at once, then the extractive summary stands in)
    fake.fallback = (r) => (isSummaryCall(r) ? { status: 429, errorType: 'rate_limit_error' } : { text: 'ok' })
    const log = capturedLog()
    const app = await buildApp({
      config: loadConfig({
        COMPACT_DB: ':memory:',
        LOG_LEVEL: 'warn',
        ANTHROPIC_API_KEY: 'sk-ant-upstream-precompute-000000',
        COMPACT_PROXY_SUMMARIES: 'gateway',
        ANTHROPIC_BASE_URL: fake.url,
        COMPACT_API_KEYS: `bob=${GATEWAY_KEY}`,
        COMPACT_PRECOMPUTE_AT: '0.5'
      }),
      logStream: log.stream
    })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const sdk = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
      for (let steps = stepsFor(0.55); steps < stepsFor(1.0) + 6; steps++) {
        await sdk.messages.create(
          { model: 'claude-test', max_tokens: 16, messages: grow(steps) as Anthropic.MessageParam[], metadata: { user_id: 'session-fault-1' } },
          { headers: { 'x-compaction-budget': String(BUDGET) } }
        )
        // each turn's background work settles before the next
        await until(
          'no summary in flight',
          async () =>
            (await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')) <=
            (await counter(app, 'compaction_proxy_precomputes_total', 'event="done"')) +
              (await counter(app, 'compaction_proxy_precomputes_total', 'event="late"')) +
              (await counter(app, 'compaction_proxy_precomputes_total', 'event="failed"'))
        )
      }
      expect(fake.requests.filter(isSummaryCall).length).toBeGreaterThan(0)
      const warns = log.lines.filter((l) => l.event === 'summarizer_fault')
      expect(warns).toHaveLength(1)
      expect(warns[0]).toMatchObject({ level: 40, reason: 'rate_limited', session_id: 'session-fault-1' })
    } finally {
      await app.close()
      await fake.close()
    }
  })
})
