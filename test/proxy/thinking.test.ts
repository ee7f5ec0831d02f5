import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'

const UPSTREAM_KEY = 'sk-ant-upstream-thinking-test-00000000'
const GATEWAY_KEY = 'gw-thinking-test-key-1'
const MODEL = 'claude-opus-5-5'

const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')

/**
 * A coding agent with thinking on, through the gateway, against an upstream that binds each thinking block
 * to its prefix (test/helpers/preserved-thinking.ts) and refuses a changed one, as the newest models do.
 * The agent keeps each answer as it came (its thinking blocks with their signatures) and sends the whole
 * history every turn; the gateway crosses its budget several times (summaries, or clearing first).
 */
async function agentSession(
  env: Record<string, string>,
  thinking: Anthropic.Messages.ThinkingConfigParam,
  turns: number,
  userEvery = 0
): Promise<{ fake: FakeAnthropic; compacted: number; thinkingSent: number; disabled: number }> {
  const fake = await new FakeAnthropic().start()
  let step = 0
  const clientModel = env.COMPACT_API_KEYS === undefined
  fake.fallback = (r) =>
    isSummaryCall(r)
      ? { toolInput: { objective: 'Fix the parser' } }
      : JSON.stringify(r.body.messages.at(-1) ?? null).includes('<compaction-request>')
        ? { text: JSON.stringify({ objective: 'Fix the parser (by the client model)', next_steps: ['Go on'] }) }
        : { content: [{ type: 'tool_use', id: `toolu_step_${++step}`, name: 'bash', input: { command: `cat src/module_${step}.ts` } }] }
  const app: App = await testApp({ ANTHROPIC_BASE_URL: fake.url, COMPACT_BUDGET: '12000', ...env })
  apps.push(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const sdk = new Anthropic({
    apiKey: clientModel ? UPSTREAM_KEY : GATEWAY_KEY,
    baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    maxRetries: 0
  })
  const messages: Anthropic.Messages.MessageParam[] = [{ role: 'user', content: 'Fix the failing parser test in src/parse.ts' }]
  let compacted = 0
  for (let t = 0; t < turns; t++) {
    const { data, response } = await sdk.messages
      .create({ model: MODEL, max_tokens: 1_024, thinking, messages }, { headers: { 'x-compaction-session': 'thinking-session' } })
      .withResponse()
    if (response.headers.get('x-compaction') === 'compacted') compacted++
    messages.push({ role: 'assistant', content: data.content as Anthropic.Messages.ContentBlockParam[] })
    const use = data.content.find((b) => b.type === 'tool_use')
    const output = `module ${t}\n${'export const value = 1\n'.repeat(120)}`
    const results: Anthropic.Messages.ContentBlockParam[] = use ? [{ type: 'tool_result', tool_use_id: use.id, content: output }] : []
    messages.push({ role: 'user', content: userEvery > 0 && t % userEvery === userEvery - 1 ? [...results, { type: 'text', text: 'Go on.' }] : results })
  }
  const main = fake.requests.filter((r) => !isSummaryCall(r))
  const thinkingSent = main.reduce(
    (n, r) =>
      n + r.body.messages.reduce((k, m) => k + (Array.isArray(m.content) ? m.content.filter((b: { type: string }) => b.type === 'thinking').length : 0), 0),
    0
  )
  const disabled = main.filter((r) => (r.body.thinking as { type?: string } | undefined)?.type === 'disabled').length
  return { fake, compacted, thinkingSent, disabled }
}

/** The gateway with a key of its own upstream and keys for its clients (else: a pass-through, the client's own model writing the summaries). */
const OWN_KEYS = { ANTHROPIC_API_KEY: UPSTREAM_KEY, COMPACT_API_KEYS: `alice=${GATEWAY_KEY}` }

const apps: App[] = []
const fakes: FakeAnthropic[] = []
afterAll(async () => {
  for (const a of apps) await a.close()
  for (const f of fakes) await f.close()
})

describe('preserved thinking through the proxy', () => {
  it('the fake upstream refuses a history whose prefix changed after a block, accepts the same conversation append-only, and drops where asked', async () => {
    const fake = await new FakeAnthropic().start()
    fakes.push(fake)
    fake.fallback = () => ({ content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } }] })
    const sdk = new Anthropic({ apiKey: UPSTREAM_KEY, baseURL: fake.url, maxRetries: 0 })
    const thinking = { type: 'adaptive' } as unknown as Anthropic.Messages.ThinkingConfigParam
    const first = await sdk.messages.create({ model: MODEL, max_tokens: 64, thinking, messages: [{ role: 'user', content: 'Task one' }] })
    expect(first.content[0]?.type).toBe('thinking')
    const history: Anthropic.Messages.MessageParam[] = [
      { role: 'user', content: 'Task one' },
      { role: 'assistant', content: first.content as Anthropic.Messages.ContentBlockParam[] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.ts' }] }
    ]
    // append-only: accepted (a string and a single text block read the same)
    await sdk.messages.create({
      model: MODEL,
      max_tokens: 64,
      thinking,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Task one' }] }, ...history.slice(1)]
    })
    // an earlier message changed: refused, naming the block
    const edited = [{ role: 'user' as const, content: 'Task one, edited' }, ...history.slice(1)]
    await expect(sdk.messages.create({ model: MODEL, max_tokens: 64, thinking, messages: edited })).rejects.toThrow(
      /messages\.1\.content\.0: this thinking block's prefix/
    )
    // the system prompt changed: refused too
    await expect(sdk.messages.create({ model: MODEL, max_tokens: 64, thinking, system: 'new rules', messages: history })).rejects.toThrow(/prefix/)
    // drop_block: accepted, the block dropped
    const drop = { type: 'adaptive', block_binding: { prefix_mismatch_behavior: 'drop_block' } } as unknown as Anthropic.Messages.ThinkingConfigParam
    await sdk.messages.create({ model: MODEL, max_tokens: 64, thinking: drop, messages: edited })
    expect(fake.thinkingDropped).toBe(1)
    // thinking enabled: the open loop's last assistant message must begin with a thinking block
    const enabled = { type: 'enabled', budget_tokens: 1_024 } as const
    const bare = [
      history[0],
      { role: 'assistant' as const, content: first.content.filter((b) => b.type !== 'thinking') as Anthropic.Messages.ContentBlockParam[] },
      history[2]
    ]
    await expect(
      sdk.messages.create({ model: MODEL, max_tokens: 2_048, thinking: enabled, messages: bare as Anthropic.Messages.MessageParam[] })
    ).rejects.toThrow(/must start with a thinking block/)
  })

  it('crosses the budget several times with adaptive thinking: every request accepted, the thinking since each crossing sent back', async () => {
    const { fake, compacted, thinkingSent } = await agentSession(OWN_KEYS, { type: 'adaptive' } as unknown as Anthropic.Messages.ThinkingConfigParam, 40)
    fakes.push(fake)
    expect(fake.refused).toEqual([])
    expect(compacted).toBeGreaterThanOrEqual(2)
    // the turns since each crossing keep their thinking: it is not all taken out
    expect(thinkingSent).toBeGreaterThan(40)
  })

  it('clears first (COMPACT_STRATEGY=hybrid), then summarizes: every request accepted', async () => {
    const { fake, compacted } = await agentSession(
      { COMPACT_STRATEGY: 'hybrid' },
      { type: 'adaptive' } as unknown as Anthropic.Messages.ThinkingConfigParam,
      40,
      5
    )
    fakes.push(fake)
    expect(fake.refused).toEqual([])
    expect(compacted).toBeGreaterThanOrEqual(1)
  })

  it("summaries written by the client's own model in its own conversation (a pass-through): every request accepted, the summary calls too", async () => {
    const { fake, compacted } = await agentSession(
      { COMPACT_PRECOMPUTE_AT: '0.5' },
      { type: 'adaptive' } as unknown as Anthropic.Messages.ThinkingConfigParam,
      40
    )
    fakes.push(fake)
    expect(fake.refused).toEqual([])
    expect(compacted).toBeGreaterThanOrEqual(2)
    expect(fake.requests.some((r) => JSON.stringify(r.body.messages.at(-1) ?? null).includes('<compaction-request>'))).toBe(true)
  })

  it('with thinking enabled, a crossing inside a tool loop goes with thinking off until the loop ends: every request accepted', async () => {
    const { fake, compacted, disabled } = await agentSession(OWN_KEYS, { type: 'enabled', budget_tokens: 1_024 }, 30, 7)
    fakes.push(fake)
    expect(fake.refused).toEqual([])
    expect(compacted).toBeGreaterThanOrEqual(2)
    expect(disabled).toBeGreaterThan(0)
  })
})
