import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import { CLEARED_MARK, type Message } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

/**
 * The Messages API's context editing (`context_management.edits`) through the real SDK's beta client,
 * performed by the gateway for an upstream whose model does not have it (the fake refuses the field, as
 * such a model does): the request edited as the API documents, the answer saying what was applied.
 */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(env: Record<string, string> = {}): Promise<{ app: App; fake: FakeAnthropic; sdk: Anthropic }> {
  const fake = await new FakeAnthropic().start()
  opened.push(fake)
  fake.fallback = { text: 'ok' }
  const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'sk-ant-upstream-cm-000000000000000', COMPACT_BUDGET: 'off', ...env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const sdk = new Anthropic({ apiKey: 'unused-client-key', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  return { app, fake, sdk }
}

/** A session of `steps` shell steps (their outputs ~6,000 characters, one with a failing test), then a run of the `keep_me` tool. */
function work(steps: number): Message[] {
  const messages: Message[] = [user('Make the importer tests pass')]
  for (let i = 0; i < steps; i++) {
    const output =
      i === 1
        ? `FAIL test/importer.test.ts > parses rows\nAssertionError: expected 3 to be 4\n${'x'.repeat(6_000)}\nexit code 1`
        : `line ${i}\n${'y'.repeat(6_000)}`
    messages.push(...shellStep(`toolu_w_${i}`, `npm test -- part ${i}`, output, i === 1))
  }
  messages.push(assistant(call('toolu_keep', 'keep_me', { note: 'pinned' })), results(result('toolu_keep', `pinned ${'k'.repeat(6_000)}`)))
  messages.push(assistant('Looked at all of them.'), user('Go on'))
  return messages
}

const forwarded = (fake: FakeAnthropic): ReceivedRequest => fake.requests.at(-1) as ReceivedRequest
const toolResults = (messages: Message[]): { id: string; text: string }[] =>
  messages.flatMap((m) =>
    typeof m.content === 'string'
      ? []
      : m.content
          .filter((b) => b.type === 'tool_result')
          .map((b) => ({ id: String(b.tool_use_id), text: typeof b.content === 'string' ? b.content : JSON.stringify(b.content) }))
  )

const CLEAR = {
  type: 'clear_tool_uses_20250919' as const,
  trigger: { type: 'input_tokens' as const, value: 5_000 },
  keep: { type: 'tool_uses' as const, value: 2 },
  exclude_tools: ['keep_me']
}

describe('context editing (clear_tool_uses_20250919, clear_thinking_20251015) performed by the gateway', () => {
  it('clears the old tool results past the trigger, keeps the newest and the excluded, and says so in the answer', async () => {
    const { fake, sdk } = await gateway()
    const messages = work(6)
    const answer = await sdk.beta.messages.create(
      {
        model: 'claude-any',
        max_tokens: 16,
        messages: messages as Anthropic.Beta.BetaMessageParam[],
        context_management: { edits: [CLEAR] },
        betas: ['context-management-2025-06-27', 'interleaved-thinking-2025-05-14']
      },
      { headers: { 'x-compaction-session': 'cm-1' } }
    )
    expect(fake.refused).toEqual([])
    const sent = forwarded(fake)
    // the field and the beta it needed never reach the upstream; the other beta does
    expect(sent.body).not.toHaveProperty('context_management')
    expect(sent.headers['anthropic-beta']).toBe('interleaved-thinking-2025-05-14')
    const after = toolResults(sent.body.messages as Message[])
    // of the 7 tool uses, the 2 newest (toolu_w_5 and the excluded toolu_keep, which counts in `keep`) stay whole; the 5 older shell runs go
    const clearedIds = after.filter((r) => r.text.startsWith(CLEARED_MARK)).map((r) => r.id)
    expect(clearedIds).toEqual(['toolu_w_0', 'toolu_w_1', 'toolu_w_2', 'toolu_w_3', 'toolu_w_4'])
    expect(after.find((r) => r.id === 'toolu_keep')?.text).toMatch(/^pinned k/)
    expect(after.find((r) => r.id === 'toolu_w_5')?.text).toMatch(/^line 5/)
    // a placeholder keeps the call, the outcome and why it failed, and names where the output is
    const failed = after.find((r) => r.id === 'toolu_w_1')!.text
    expect(failed).toContain('bash(npm test -- part 1)')
    expect(failed).toContain('it failed')
    expect(failed).toContain('FAIL test/importer.test.ts > parses rows')
    // the placeholder names the recall tool the gateway gave the model, after the client's own tools
    expect(failed).toContain('call the `gateway_recall` tool with the query "toolu_w_1" to get it back')
    expect((sent.body.tools as { name: string }[]).map((t) => t.name)).toEqual([
      ...((messages as unknown as { tools?: { name: string }[] }).tools ?? []).map((t) => t.name),
      'gateway_recall'
    ])
    // every call still has its result, every other message as sent
    const sentMessages = sent.body.messages as Message[]
    expect(sentMessages).toHaveLength(messages.length)
    sentMessages.forEach((m, i) => {
      if (!toolResults([m]).some((r) => clearedIds.includes(r.id))) expect(m).toEqual(messages[i])
    })
    expect(answer.context_management?.applied_edits).toEqual([
      { type: 'clear_tool_uses_20250919', cleared_tool_uses: 5, cleared_input_tokens: expect.any(Number) }
    ])
    const clearedTokens = (answer.context_management?.applied_edits[0] as { cleared_input_tokens: number }).cleared_input_tokens
    expect(clearedTokens).toBeGreaterThan(5 * 1_400)
  })

  it('says so in a stream too, in its message_delta, and the SDK reads it; under the trigger nothing is cleared and the list is empty', async () => {
    const { fake, sdk } = await gateway()
    const stream = sdk.beta.messages.stream({
      model: 'claude-any',
      max_tokens: 16,
      messages: work(6) as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [CLEAR] }
    })
    const final = await stream.finalMessage()
    expect(final.context_management?.applied_edits).toEqual([
      { type: 'clear_tool_uses_20250919', cleared_tool_uses: 5, cleared_input_tokens: expect.any(Number) }
    ])
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'ok' })
    const small = work(1)
    const quiet = await sdk.beta.messages.create({
      model: 'claude-any',
      max_tokens: 16,
      messages: small as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [CLEAR] }
    })
    // nothing applied: the answer as the upstream gave it
    expect(quiet.context_management?.applied_edits ?? []).toEqual([])
    expect(forwarded(fake).body.messages).toEqual(small)
    expect(fake.refused).toEqual([])
  })

  it('clears the thinking of all but the newest assistant turns, first, then the tool results', async () => {
    const { fake, sdk } = await gateway()
    const thinking = (n: number) => ({ type: 'thinking', thinking: `thought ${n} ${'t'.repeat(2_000)}`, signature: `sig-${n}` })
    const messages: Message[] = [
      user('first task'),
      assistant(thinking(1), call('toolu_a', 'bash', { command: 'ls' })),
      results(result('toolu_a', 'a.ts')),
      assistant(thinking(2), 'done with the first'),
      user('second task'),
      assistant(thinking(3), call('toolu_b', 'bash', { command: 'ls b' })),
      results(result('toolu_b', 'b.ts')),
      assistant(thinking(4), 'done'),
      user('go on')
    ]
    // a model from before preserved thinking: the newest turn's thinking is kept as sent
    const answer = await sdk.beta.messages.create({
      model: 'claude-sonnet-4-6',
      max_tokens: 16,
      messages: messages as Anthropic.Beta.BetaMessageParam[],
      context_management: {
        edits: [
          { type: 'clear_thinking_20251015', keep: { type: 'thinking_turns', value: 1 } },
          { ...CLEAR, trigger: { type: 'tool_uses', value: 10 } }
        ]
      }
    })
    const sent = forwarded(fake).body.messages as Message[]
    const thoughts = sent.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'thinking').map((b) => String(b.signature))))
    expect(thoughts).toEqual(['sig-3', 'sig-4'])
    // the tool-use trigger (10) is not reached: no tool result is cleared, and only the thinking edit is reported
    expect(answer.context_management?.applied_edits).toEqual([
      { type: 'clear_thinking_20251015', cleared_thinking_turns: 1, cleared_input_tokens: expect.any(Number) }
    ])
    // keep "all" clears nothing
    await sdk.beta.messages.create({
      model: 'claude-any',
      max_tokens: 16,
      messages: messages as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] }
    })
    expect(forwarded(fake).body.messages).toEqual(messages)
    // a model that checks each thinking block against its prefix: once the oldest turns' thinking is cleared, the
    // newest turns' was produced on another prefix and would be refused; no thinking goes on after the first change
    await sdk.beta.messages.create({
      model: 'claude-opus-5-5',
      max_tokens: 16,
      messages: messages as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: { type: 'thinking_turns', value: 1 } }] }
    })
    const checked = forwarded(fake).body.messages as Message[]
    expect(checked.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'thinking')))).toEqual([])
    expect(checked.map((m) => m.role)).toEqual(messages.map((m) => m.role))
  })

  it('refuses what the API refuses with its 400, naming the field', async () => {
    const { fake, sdk } = await gateway()
    const cases: [unknown, RegExp][] = [
      [
        { edits: [{ ...CLEAR, keep: { type: 'tool_uses', value: -1 } }] },
        /context_management\.edits\.0\.keep\.value: Input should be greater than or equal to 0/
      ],
      [{ edits: [{ ...CLEAR, trigger: { type: 'messages', value: 3 } }] }, /context_management\.edits\.0\.trigger\.type/],
      [{ edits: [{ type: 'clear_everything' }] }, /context_management\.edits\.0\.type: Input should be 'clear_tool_uses_20250919'/],
      [{ edits: [{ ...CLEAR, colour: 'red' }] }, /context_management\.edits\.0\.colour: Extra inputs are not permitted/],
      [{ edits: [CLEAR, { type: 'clear_thinking_20251015' }] }, /context_management\.edits\.1: clear_thinking_20251015 must be the first edit/],
      [{ edits: [{ ...CLEAR, exclude_tools: 'bash' }] }, /context_management\.edits\.0\.exclude_tools/]
    ]
    for (const [field, message] of cases) {
      const err = await sdk.beta.messages
        .create({
          model: 'claude-any',
          max_tokens: 16,
          messages: work(2) as Anthropic.Beta.BetaMessageParam[],
          context_management: field as Anthropic.Beta.BetaContextManagementConfig
        })
        .then(
          () => undefined,
          (e: unknown) => e
        )
      expect(err, String(message)).toBeInstanceOf(Anthropic.BadRequestError)
      expect((err as Error).message).toMatch(message)
    }
    expect(fake.requests).toEqual([])
  })

  it('keeps the output of each cleared result in the cold layer, where recall finds it by its call', async () => {
    const { app, sdk } = await gateway()
    await sdk.beta.messages.create(
      { model: 'claude-any', max_tokens: 16, messages: work(6) as Anthropic.Beta.BetaMessageParam[], context_management: { edits: [CLEAR] } },
      { headers: { 'x-compaction-session': 'cm-recall' } }
    )
    // the next request clears them again: their output is kept once
    await sdk.beta.messages.create(
      { model: 'claude-any', max_tokens: 16, messages: work(6) as Anthropic.Beta.BetaMessageParam[], context_management: { edits: [CLEAR] } },
      { headers: { 'x-compaction-session': 'cm-recall' } }
    )
    await app.store.drain()
    const found = await app.inject({ method: 'POST', url: '/v1/sessions/cm-recall/recall', payload: { query: 'AssertionError expected 3 to be 4', limit: 5 } })
    expect(found.statusCode).toBe(200)
    const hits = found.json<{ results: { text: string; kind: string }[] }>().results
    expect(hits.length).toBeGreaterThan(0)
    expect(hits[0]!.text).toContain('bash(npm test -- part 1) [toolu_w_1]')
    expect(hits[0]!.text).toContain('AssertionError: expected 3 to be 4')
    const byCall = found.json<{ results: { text: string }[] }>().results.filter((h) => h.text.includes('[toolu_w_1]'))
    expect(byCall).toHaveLength(1)
  })

  it('counts tokens as they would be sent, saying what the count was before the edits', async () => {
    const { fake, sdk } = await gateway()
    const counted = await sdk.beta.messages.countTokens({
      model: 'claude-any',
      messages: work(6) as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [CLEAR] }
    })
    expect(forwarded(fake).body).not.toHaveProperty('context_management')
    expect(counted.context_management?.original_input_tokens).toBeGreaterThan(counted.input_tokens + 5_000)
  })

  it('forwards the field untouched where told to', async () => {
    const told = await gateway({ COMPACT_CONTEXT_MANAGEMENT: 'forward' })
    told.fake.contextManagement = true
    const body = { model: 'claude-any', max_tokens: 16, messages: work(6), context_management: { edits: [CLEAR] } }
    const raw = JSON.stringify(body)
    const res = await fetch(`${told.sdk.baseURL}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-beta': 'context-management-2025-06-27' },
      body: raw
    })
    expect(res.status).toBe(200)
    expect(forwarded(told.fake).raw).toBe(raw)
    expect(forwarded(told.fake).headers['anthropic-beta']).toBe('context-management-2025-06-27')
  })
})

describe('compaction (compact_20260112) performed by the gateway', () => {
  const COMPACT = { type: 'compact_20260112' as const, trigger: { type: 'input_tokens' as const, value: 12_000 } }

  it('compacts past the trigger: the compaction block first in the answer, the upstream given the compacted history, and the next request read from the block on', async () => {
    const { fake, sdk } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    const messages = work(8)
    const first = await sdk.beta.messages.create(
      {
        model: 'claude-any',
        max_tokens: 16,
        messages: messages as Anthropic.Beta.BetaMessageParam[],
        context_management: { edits: [COMPACT] },
        betas: ['compact-2026-01-12']
      },
      { headers: { 'x-compaction-session': 'compact-1' } }
    )
    expect(fake.refused).toEqual([])
    const sent = forwarded(fake)
    expect(sent.body).not.toHaveProperty('context_management')
    expect(sent.headers['anthropic-beta']).toBeUndefined()
    const upstreamHistory = sent.body.messages as Message[]
    expect(upstreamHistory.length).toBeLessThan(messages.length)
    const [block, text] = first.content
    expect(block).toMatchObject({
      type: 'compaction',
      content: expect.stringContaining('Make the importer tests pass'),
      encrypted_content: expect.stringMatching(/^cgw2\./)
    })
    expect(text).toMatchObject({ type: 'text', text: 'ok' })
    // the compaction's own usage is an iteration of its own, the message's the top-level usage
    expect((first.usage.iterations ?? []).map((i) => i.type)).toEqual(['compaction', 'message'])
    expect(first.context_management?.applied_edits).toEqual([])

    // the client appends the answer as it came and goes on: what precedes the block is dropped, the block stands for it
    const next = [...messages, { role: 'assistant' as const, content: first.content }, user('And now the exporter')]
    await sdk.beta.messages.create(
      { model: 'claude-any', max_tokens: 16, messages: next as Anthropic.Beta.BetaMessageParam[], context_management: { edits: [COMPACT] } },
      { headers: { 'x-compaction-session': 'compact-1' } }
    )
    expect(fake.refused).toEqual([])
    const again = forwarded(fake).body.messages as Message[]
    expect(again).toEqual([...upstreamHistory, { role: 'assistant', content: [first.content[1]] }, user('And now the exporter')])
  })

  it("is written by a model while the client waits, under its instructions: the gateway's (COMPACT_PROXY_SUMMARIES=gateway), else the client's own with its own key", async () => {
    const instructions = 'Name every failing test; leave out the passing parts.'
    const isSummary = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')
    const isClientSummary = (r: ReceivedRequest): boolean => JSON.stringify(r.body.messages.at(-1) ?? null).includes('<compaction-request>')
    const ask = (sdk: Anthropic) =>
      sdk.beta.messages.create({
        model: 'claude-any',
        max_tokens: 16,
        messages: work(8) as Anthropic.Beta.BetaMessageParam[],
        context_management: { edits: [{ ...COMPACT, instructions }] }
      })
    // the gateway's own model
    const own = await gateway({ COMPACT_PROXY_SUMMARIES: 'gateway' })
    own.fake.fallback = (r) => (isSummary(r) ? { toolInput: { objective: 'Make the importer tests pass (model)' } } : { text: 'ok' })
    const first = await ask(own.sdk)
    expect((first.content[0] as { content: string }).content).toContain('(model)')
    expect(JSON.stringify(own.fake.requests.find(isSummary)?.body)).toContain(instructions)
    // no model of its own: the client's, in its own conversation, with its own key
    const fake = await new FakeAnthropic().start()
    opened.push(fake)
    fake.fallback = (r) => (isClientSummary(r) ? { text: JSON.stringify({ objective: 'Make the importer tests pass (client model)' }) } : { text: 'ok' })
    const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, COMPACT_BUDGET: 'off' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    opened.push(app)
    const sdk = new Anthropic({
      apiKey: 'sk-ant-client-own-key-000000000',
      baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      maxRetries: 0
    })
    const second = await ask(sdk)
    expect((second.content[0] as { content: string }).content).toContain('(client model)')
    const call = fake.requests.find(isClientSummary)
    expect(JSON.stringify(call?.body.messages.at(-1))).toContain(instructions)
    expect(call?.body).not.toHaveProperty('context_management')
    expect(fake.refused).toEqual([])
  })

  it('streams the block as the API streams one, ahead of the upstream blocks (their indices one on), and the SDK reads it', async () => {
    const { fake, sdk } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    const stream = sdk.beta.messages.stream({
      model: 'claude-any',
      max_tokens: 16,
      messages: work(8) as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [COMPACT] }
    })
    const summaries: string[] = []
    stream.on('compaction', (content) => summaries.push(content))
    const final = await stream.finalMessage()
    expect(final.content.map((b) => b.type)).toEqual(['compaction', 'text'])
    expect(final.content[1]).toMatchObject({ text: 'ok' })
    expect(summaries).toEqual([(final.content[0] as { content: string }).content])
    expect(final.context_management?.applied_edits).toEqual([])
    expect(fake.refused).toEqual([])
  })

  it('pauses after the compaction where asked: the block alone, stop_reason "compaction", nothing sent upstream', async () => {
    const { fake, sdk } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    const paused = await sdk.beta.messages.create({
      model: 'claude-any',
      max_tokens: 16,
      messages: work(8) as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [{ ...COMPACT, pause_after_compaction: true }] }
    })
    expect(paused.stop_reason).toBe('compaction')
    expect(paused.content.map((b) => b.type)).toEqual(['compaction'])
    expect(fake.requests).toEqual([])
    const streamed = await sdk.beta.messages
      .stream({
        model: 'claude-any',
        max_tokens: 16,
        messages: work(8) as Anthropic.Beta.BetaMessageParam[],
        context_management: { edits: [{ ...COMPACT, pause_after_compaction: true }] }
      })
      .finalMessage()
    expect(streamed.stop_reason).toBe('compaction')
    expect(streamed.content).toEqual([expect.objectContaining({ type: 'compaction', content: (paused.content[0] as { content: string }).content })])
    expect(fake.requests).toEqual([])
    // under the trigger: no compaction, the upstream's answer as it is
    const small = await sdk.beta.messages.create({
      model: 'claude-any',
      max_tokens: 16,
      messages: work(1) as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [{ ...COMPACT, pause_after_compaction: true }] }
    })
    expect(small.content.map((b) => b.type)).toEqual(['text'])
  })

  it("reads another's compaction block by its summary, and refuses a bad edit naming the field", async () => {
    const { fake, sdk } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    const history = [
      user('old request'),
      {
        role: 'assistant' as const,
        content: [
          { type: 'compaction', content: 'Summary: the parser was fixed.', encrypted_content: 'opaque-from-elsewhere' },
          { type: 'text', text: 'Next?' }
        ]
      },
      user('Now the tests')
    ]
    await sdk.beta.messages.create({
      model: 'claude-any',
      max_tokens: 16,
      messages: history as Anthropic.Beta.BetaMessageParam[],
      context_management: { edits: [COMPACT] }
    })
    expect(forwarded(fake).body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Summary: the parser was fixed.' }] },
      assistant('Next?'),
      user('Now the tests')
    ])
    const err = await sdk.beta.messages
      .create({
        model: 'claude-any',
        max_tokens: 16,
        messages: work(1) as Anthropic.Beta.BetaMessageParam[],
        context_management: { edits: [{ ...COMPACT, pause_after_compaction: 'yes' }] } as never
      })
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect((err as Error).message).toMatch(/context_management\.edits\.0\.pause_after_compaction: Input should be a valid boolean/)
  })
})
