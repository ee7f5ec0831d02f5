import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Message, promptTokens, validateHistory } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { until } from '../helpers/wait.js'

const GATEWAY_KEY = 'gw-precompute-key-1'
const BUDGET = 10_000
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')

/** The history of one session after `steps` steps: each step a shell call, its output and a new request. */
function grow(steps: number): Message[] {
  const messages: Message[] = [user('Migrate the config loader in src/config.ts to the new schema')]
  for (let i = 0; i < steps; i++) {
    messages.push(...shellStep(`toolu_p_${i}`, `sed -n 1,80p src/part_${i}.ts`, `part ${i}: ${'y'.repeat(1_600)}`))
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

describe('precomputed summaries: the request that crosses the budget waits for no model call', () => {
  let fake: FakeAnthropic
  let app: App
  let sdk: Anthropic
  let summaries = 0

  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    // The model takes its time over a summary; the proxied calls answer at once.
    fake.fallback = (r) => (isSummaryCall(r) ? { delayMs: 300, toolInput: { objective: `Migrate the config loader (summary ${++summaries})` } } : { text: 'ok' })
    app = await testApp({ ANTHROPIC_API_KEY: 'sk-ant-upstream-precompute-000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_API_KEYS: `bob=${GATEWAY_KEY}`, COMPACT_PRECOMPUTE_AT: '0.75' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    sdk = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  })
  afterAll(async () => {
    await app.close()
    await fake.close()
  })

  const send = (messages: Message[]) =>
    sdk.messages
      .create({ model: 'claude-test', max_tokens: 16, messages: messages as Anthropic.MessageParam[], metadata: { user_id: 'session-precompute-1' } }, { headers: { 'x-compaction-budget': String(BUDGET) } })
      .withResponse()

  it('writes the summary ahead from where a crossing leaves the context (half the room), takes it at the crossing, and begins the next one at once', async () => {
    const early = stepsFor(0.3)
    const ahead = stepsFor(0.55)
    const over = stepsFor(1.05)
    expect(early < ahead && ahead < over).toBe(true)

    // Under half the room (no system prompt or tools here: half the budget): nothing happens in the background.
    expect((await send(grow(early))).response.headers.get('x-compaction')).toBe('none')
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')).toBe(0)

    // Past it: forwarded as it is, and the compaction the crossing would make is written in the background.
    expect((await send(grow(ahead))).response.headers.get('x-compaction')).toBe('none')
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')).toBe(1)
    await until('one precompute done', async () => (await counter(app, 'compaction_proxy_precomputes_total', 'event="done"')) === 1)
    const summaryCallsAhead = fake.requests.filter(isSummaryCall).length
    expect(summaryCallsAhead).toBe(1)

    // The crossing: compacted from the precomputed summary, with the turns since merged in; no model call waited for.
    const crossing = grow(over)
    const { response } = await send(crossing)
    expect(response.headers.get('x-compaction')).toBe('compacted')
    expect(await counter(app, 'compaction_proxy_compactions_total', 'source="model"')).toBe(0)
    const taken = (await counter(app, 'compaction_proxy_compactions_total', 'source="precomputed"')) + (await counter(app, 'compaction_proxy_compactions_total', 'source="merged"'))
    expect(taken).toBe(1)
    const sent = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    const messages = sent.body.messages as unknown as Message[]
    expect(validateHistory(messages)).toBeUndefined()
    expect(messages.at(-1)).toEqual(crossing.at(-1))
    expect(JSON.stringify(messages[0])).toContain('(summary 1)')
    expect(promptTokens(messages, undefined, undefined)).toBeLessThanOrEqual(BUDGET)
    // and its figures are those of what was forwarded, not of the history the summary was written from
    const after = await app.metrics.registry.getSingleMetricAsString('compaction_context_after_tokens')
    const sum = Number(after.split('\n').find((l) => l.startsWith('compaction_context_after_tokens_sum'))?.split(' ').at(-1))
    expect(sum).toBe(promptTokens(messages, undefined, undefined))

    // The crossing began the next summary at once; the session grows on with the same summary turn sent.
    let steps = over
    while ((await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')) < 2 && steps < over + 40) {
      await until('a precompute done or refined', async () => (await counter(app, 'compaction_proxy_precomputes_total', 'event="done"')) + (await counter(app, 'compaction_proxy_precomputes_total', 'event="refined"')) >= 1)
      steps++
      const { response: r } = await send(grow(steps))
      expect(r.headers.get('x-compaction')).toBe('compacted')
    }
    expect(await counter(app, 'compaction_proxy_precomputes_total', 'event="started"')).toBe(2)
  })
})
