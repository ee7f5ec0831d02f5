import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import { loadConfig } from '../../src/server/config.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

/** The session after `steps` steps of about 4,000 tokens each (two requests a step: the call, then the answer). */
function grow(steps: number): Message[] {
  const messages: Message[] = [user('Move the exporter to the new API')]
  for (let i = 0; i < steps; i++)
    messages.push(...shellStep(`toolu_pb_${i}`, `cat src/export_${i}.ts`, `export ${i}: ${'x'.repeat(16_000)}`), assistant(`Read ${i}.`), user(`Next ${i + 1}`))
  return messages
}

describe('a crossing that waits while it would not pay back (COMPACT_LIMIT), through the proxy', () => {
  it('forwards a young conversation over its budget whole, compacts it once it pays back, and records why and after how many requests', async () => {
    const fake = await new FakeAnthropic().start()
    opened.push(fake)
    fake.fallback = () => ({ text: 'ok' })
    const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, COMPACT_SUMMARIZER: 'extractive', COMPACT_BUDGET: '8000', COMPACT_LIMIT: '200000' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    opened.push(app)
    const sdk = new Anthropic({
      apiKey: 'sk-ant-client-payback-000000000',
      baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      maxRetries: 0
    })
    const sent: { steps: number; compaction: string | null }[] = []
    for (let steps = 1; steps <= 40; steps++) {
      const { response } = await sdk.messages
        .create({ model: 'claude-any', max_tokens: 16, messages: grow(steps) as Anthropic.MessageParam[] }, { headers: { 'x-session-id': 'payback-1' } })
        .withResponse()
      sent.push({ steps, compaction: response.headers.get('x-compaction') })
      if (response.headers.get('x-compaction') === 'compacted') break
    }
    expect(sent.at(-1)?.compaction).toBe('compacted')
    // the requests over the budget before it went upstream whole, as the fake counted them (one upstream request a turn)
    expect(fake.requests).toHaveLength(sent.length)
    const over = sent.filter((s, i) => s.compaction === 'none' && fake.requests[i]!.cache!.tokens > 8_000)
    expect(over.length).toBeGreaterThan(0)
    for (const s of over) expect(fake.requests[s.steps - 1]!.body.messages).toHaveLength(grow(s.steps).length)
    const waited = await app.metrics.registry.getSingleMetricAsString('compaction_proxy_crossings_waited_total')
    const count = Number(/compaction_proxy_crossings_waited_total (\d+)/.exec(waited)?.[1])
    expect(count).toBe(over.length)
    const list = (await app.inject({ url: '/v1/sessions/payback-1/compactions' })).json<{ compactions: { id: string; crossing?: unknown }[] }>()
    expect(list.compactions).toHaveLength(1)
    expect(list.compactions[0]!.crossing).toEqual({ because: 'pays_back', waited_requests: count, limit_tokens: 200_000 })
    const detail = await app.inject({ url: `/v1/sessions/payback-1/compactions/${list.compactions[0]!.id}` })
    expect(detail.json().compaction.crossing).toEqual({ because: 'pays_back', waited_requests: count, limit_tokens: 200_000 })
    expect(fake.refused).toEqual([])
  })

  it('refuses a limit at or under the budget at start-up, naming the variable', () => {
    expect(() => loadConfig({ COMPACT_BUDGET: '45000', COMPACT_LIMIT: '45000' })).toThrow(/COMPACT_LIMIT.*above COMPACT_BUDGET/)
    expect(() => loadConfig({ COMPACT_BUDGET: 'off', COMPACT_LIMIT: '90000' })).toThrow(/COMPACT_LIMIT/)
    expect(loadConfig({ COMPACT_BUDGET: '45000', COMPACT_LIMIT: '180000' }).COMPACT_LIMIT).toBe(180_000)
  })
})
