import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import { CLEARED_MARK, type Message, promptTokens } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'

/**
 * Clearing as the proxy's first tier (COMPACT_STRATEGY=hybrid): a conversation that crosses its budget has
 * its old tool results cleared before anything is summarized, the cleared prefix the same byte for byte until
 * the next crossing, and a summary only once clearing cannot reach the target.
 */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

const BUDGET = 20_000
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')

async function gateway(strategy: string): Promise<{ app: App; fake: FakeAnthropic; sdk: Anthropic }> {
  const fake = await new FakeAnthropic().start()
  opened.push(fake)
  fake.fallback = { text: 'ok' }
  const app = await testApp({
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: 'sk-ant-upstream-clear-0000000000000',
    COMPACT_SUMMARIZER: 'extractive',
    COMPACT_STRATEGY: strategy,
    COMPACT_PRECOMPUTE_AT: 'off'
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const sdk = new Anthropic({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  return { app, fake, sdk }
}

/** The session after `steps` steps: each a command with a 6,000-character output, one failing; from `talkFrom` on the user writes at length. */
function grow(steps: number, talkFrom = Infinity): Message[] {
  const messages: Message[] = [user('Make the importer tests pass')]
  for (let i = 0; i < steps; i++) {
    const output =
      i === 2 ? `FAIL test/importer.test.ts > parses rows\nAssertionError: expected 3 to be 4\n${'x'.repeat(6_000)}` : `run ${i}\n${'y'.repeat(6_000)}`
    messages.push(
      ...shellStep(`toolu_c_${i}`, `npm test -- part ${i}`, output, i === 2),
      assistant(`Looked at run ${i}.`),
      user(i >= talkFrom ? `Here is more context for step ${i}: ${'words '.repeat(1_500)}` : 'Go on')
    )
  }
  return messages
}

describe("clearing, the proxy's first tier (COMPACT_STRATEGY=hybrid)", () => {
  it('clears old tool results at the crossing, keeps the prefix byte for byte until the next, and summarizes only when clearing cannot reach the target', async () => {
    const { app, fake, sdk } = await gateway('hybrid')
    const send = async (messages: Message[]): Promise<{ sent: ReceivedRequest; compaction: string | null; summary: string | null }> => {
      const { response } = await sdk.messages
        .create(
          { model: 'claude-any', max_tokens: 16, messages: messages as Anthropic.MessageParam[] },
          { headers: { 'x-compaction-budget': String(BUDGET), 'x-compaction-session': 'clear-1' } }
        )
        .withResponse()
      return {
        sent: fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!,
        compaction: response.headers.get('x-compaction'),
        summary: response.headers.get('x-compaction-summary-id')
      }
    }
    let steps = 1
    let first: Awaited<ReturnType<typeof send>> | undefined
    for (; steps < 40; steps++) {
      const r = await send(grow(steps))
      if (r.compaction === 'compacted') {
        first = r
        break
      }
      expect(JSON.parse(r.sent.raw).messages).toEqual(grow(steps))
    }
    expect(first).toBeDefined()
    // the crossing: old results cleared, the newest three whole, every other message as the client sent it, no summary
    const sentMessages = first!.sent.body.messages as Message[]
    const client = grow(steps)
    expect(sentMessages).toHaveLength(client.length)
    expect(first!.summary).toBeNull()
    const results = sentMessages.flatMap((m) =>
      typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'tool_result').map((b) => String(b.content))
    )
    expect(results.slice(-3).every((t) => !t.startsWith(CLEARED_MARK))).toBe(true)
    expect(results.slice(0, -3).some((t) => t.startsWith(CLEARED_MARK))).toBe(true)
    expect(promptTokens(sentMessages, undefined, undefined)).toBeLessThanOrEqual(BUDGET)
    // the oldest go first: the failing run among them, its placeholder saying why it failed
    const failing = results.find((t) => t.includes('npm test -- part 2'))
    expect(failing?.startsWith(CLEARED_MARK)).toBe(true)
    expect(failing).toContain('FAIL test/importer.test.ts > parses rows')

    // the next turns: the cleared prefix as it was, byte for byte, and the new turns as the client sent them
    const next = await send(grow(steps + 1))
    const nextMessages = JSON.stringify((next.sent.body.messages as Message[]).slice(0, sentMessages.length))
    expect(nextMessages).toBe(JSON.stringify(sentMessages))
    expect(next.sent.raw).toContain(JSON.stringify(sentMessages).slice(1, -1))

    // the user now writes at length: clearing cannot bring it down, and a summary is made
    let summarized: string | null = null
    for (let s = steps + 2; s < steps + 30 && !summarized; s++) summarized = (await send(grow(s, steps))).summary
    expect(summarized).not.toBeNull()
    expect(fake.refused).toEqual([])
    const overview = (await app.inject({ method: 'GET', url: '/v1/overview?session_id=clear-1' })).json()
    expect(overview.clearings.count).toBeGreaterThanOrEqual(1)
    expect(overview.clearings.tool_results).toBeGreaterThan(0)
  })

  it('leaves every request as it is under COMPACT_STRATEGY=summarize (the tier is off)', async () => {
    const { fake, sdk } = await gateway('summarize')
    for (let steps = 1; steps < 12; steps++) {
      await sdk.messages.create(
        { model: 'claude-any', max_tokens: 16, messages: grow(steps) as Anthropic.MessageParam[] },
        { headers: { 'x-compaction-budget': String(BUDGET), 'x-compaction-session': 'summ-1' } }
      )
    }
    const results = fake.requests
      .filter((r) => !isSummaryCall(r))
      .flatMap((r) =>
        (r.body.messages as Message[]).flatMap((m) =>
          typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'tool_result').map((b) => String(b.content))
        )
      )
    expect(results.some((t) => t.startsWith(CLEARED_MARK))).toBe(false)
  })
})

describe("clearing in the other APIs' own formats", () => {
  it("clears a Chat Completions conversation's old tool messages in place, the upstream taking every request", async () => {
    const { FakeOpenAi } = await import('../helpers/fake-openai.js')
    const { default: OpenAI } = await import('openai')
    const fake = await new FakeOpenAi().start()
    fake.fallback = { text: 'ok' }
    opened.push(fake)
    const app = await testApp({
      OPENAI_BASE_URL: `${fake.url}/v1`,
      OPENAI_API_KEY: 'sk-upstream-clear-chat-000000',
      COMPACT_SUMMARIZER: 'extractive',
      COMPACT_STRATEGY: 'hybrid',
      COMPACT_PRECOMPUTE_AT: 'off'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    opened.push(app)
    const sdk = new OpenAI({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`, maxRetries: 0 })
    const chat = (steps: number) => {
      const messages: Record<string, unknown>[] = [
        { role: 'system', content: 'You are an agent.' },
        { role: 'user', content: 'Make the tests pass' }
      ]
      for (let i = 0; i < steps; i++) {
        messages.push({
          role: 'assistant',
          content: null,
          tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `npm test -- ${i}` }) } }]
        })
        messages.push(
          { role: 'tool', tool_call_id: `call_${i}`, content: `run ${i}\n${'y'.repeat(6_000)}` },
          { role: 'assistant', content: `Looked at run ${i}.` },
          { role: 'user', content: 'Go on' }
        )
      }
      return messages
    }
    let crossed = -1
    for (let steps = 1; steps < 30 && crossed < 0; steps++) {
      const { response } = await sdk.chat.completions
        .create(
          { model: 'gpt-test', messages: chat(steps) as never },
          { headers: { 'x-compaction-budget': String(BUDGET), 'x-compaction-session': 'clear-chat' } }
        )
        .withResponse()
      if (response.headers.get('x-compaction') === 'compacted') crossed = steps
    }
    expect(crossed).toBeGreaterThan(0)
    expect(fake.refused).toEqual([])
    const sent = fake.requests.at(-1)!.body.messages as Record<string, unknown>[]
    const client = chat(crossed)
    expect(sent).toHaveLength(client.length)
    const tools = sent.filter((m) => m.role === 'tool').map((m) => String(m.content))
    expect(tools.slice(-3).every((t) => !t.startsWith(CLEARED_MARK))).toBe(true)
    expect(tools.some((t) => t.startsWith(CLEARED_MARK))).toBe(true)
    sent.forEach((m, i) =>
      m.role === 'tool' && String(m.content).startsWith(CLEARED_MARK) ? expect(m.tool_call_id).toBe(client[i]!.tool_call_id) : expect(m).toEqual(client[i])
    )
  })
})
