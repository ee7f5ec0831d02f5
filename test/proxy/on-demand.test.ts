import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { shellStep, user } from '../helpers/history.js'

const UPSTREAM_KEY = 'sk-ant-upstream-on-demand-test-0000000'
const GATEWAY_KEY = 'gw-on-demand-test-key-1'
const BETA = 'compact-2026-09-04'
const INSTRUCTIONS = 'Keep every file path and the failing test names; say nothing of style.'

type Beta = Anthropic.Beta.Messages.BetaMessageParam
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')
const isClientSummaryCall = (r: ReceivedRequest): boolean => JSON.stringify(r.body.messages.at(-1) ?? null).includes('<compaction-request>')

/** A coding session: a task, then `steps` shell steps. */
function history(steps: number): Message[] {
  const messages: Message[] = [user('Fix the failing parser test in src/parse.ts')]
  for (let i = 0; i < steps; i++) messages.push(...shellStep(`toolu_od_${i}`, `cat src/module_${i}.ts`, `module ${i}: ${'x'.repeat(400)}`))
  return messages
}

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(env: Record<string, string> = {}, own = true): Promise<{ fake: FakeAnthropic; sdk: Anthropic }> {
  const fake = await new FakeAnthropic().start()
  opened.push(fake)
  fake.fallback = (r) =>
    isSummaryCall(r)
      ? { toolInput: { objective: 'Fix the failing parser test (by the model)', files: ['src/parse.ts'] } }
      : isClientSummaryCall(r)
        ? { text: JSON.stringify({ objective: 'Fix the failing parser test (by the client model)', files: ['src/parse.ts'] }) }
        : { text: 'ok' }
  // the gateway's own key and model (its summaries by COMPACT_MODEL); without, the client's own
  const keys: Record<string, string> = own
    ? { ANTHROPIC_API_KEY: UPSTREAM_KEY, COMPACT_API_KEYS: `alice=${GATEWAY_KEY}`, COMPACT_PROXY_SUMMARIES: 'gateway' }
    : {}
  const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, ...keys, ...env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const sdk = new Anthropic({
    apiKey: own ? GATEWAY_KEY : UPSTREAM_KEY,
    baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    maxRetries: 0
  })
  return { fake, sdk }
}

const compactionOf = (content: unknown[]): Record<string, unknown> =>
  content.find((b) => (b as { type: string }).type === 'compaction') as Record<string, unknown>

describe('compaction on demand (beta compact-2026-09-04), answered by the gateway for any upstream', () => {
  it('summarizes the whole conversation with a model under the instructions, answers one compaction block, forwards nothing; a later request is read from it', async () => {
    const { fake, sdk } = await gateway()
    const messages = history(12)
    const { data, response } = await sdk.beta.messages
      .create({
        model: 'claude-any',
        max_tokens: 1_024,
        messages: messages as Beta[],
        compaction: { type: 'summarize', instructions: INSTRUCTIONS },
        betas: [BETA]
      } as Anthropic.Beta.Messages.MessageCreateParamsNonStreaming)
      .withResponse()
    expect(data.stop_reason).toBe('compaction')
    expect(data.content).toHaveLength(1)
    const block = compactionOf(data.content)
    expect(block.content).toContain('Fix the failing parser test (by the model)')
    expect(String(block.signature)).toMatch(/^cgw2\./)
    expect(response.headers.get('x-compaction')).toBe('compacted')
    expect(response.headers.get('x-compaction-summarizer')).toBe('anthropic')
    // the model wrote it, under the request's instructions; nothing else went upstream
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    expect(JSON.stringify(calls[0]?.body)).toContain('Keep every file path and the failing test names')
    expect(fake.requests.filter((r) => !isSummaryCall(r))).toEqual([])

    // the block first in place of what it summarized, then the conversation goes on
    const next = [{ role: 'assistant', content: data.content }, user('Now run the tests')] as Beta[]
    await sdk.beta.messages.create({ model: 'claude-any', max_tokens: 64, messages: next, betas: [BETA] })
    const forwarded = fake.requests.filter((r) => !isSummaryCall(r))
    expect(forwarded).toHaveLength(1)
    expect(fake.refused).toEqual([])
    const sent = JSON.stringify(forwarded[0]?.body.messages)
    expect(sent).not.toContain('"compaction"')
    expect(sent).toContain('Fix the failing parser test (by the model)')
    expect(sent).toContain('Now run the tests')
  })

  it('keeps recent turns: the older turns compacted, the block then the kept turns word for word', async () => {
    const { fake, sdk } = await gateway()
    const messages = history(12)
    const older = messages.slice(0, 15)
    const kept = messages.slice(15)
    const data = await sdk.beta.messages.create({
      model: 'claude-any',
      max_tokens: 1_024,
      messages: older as Beta[],
      compaction: { type: 'summarize' },
      betas: [BETA]
    })
    const next = [{ role: 'assistant', content: data.content }, ...kept, user('go on')] as Beta[]
    await sdk.beta.messages.create({ model: 'claude-any', max_tokens: 64, messages: next, betas: [BETA] })
    const forwarded = fake.requests.filter((r) => !isSummaryCall(r))
    expect(fake.refused).toEqual([])
    const sent = forwarded[0]?.body.messages as Message[]
    for (const m of kept) expect(sent).toContainEqual(m)
  })

  it('in the background: the conversation goes on while the summary is written, with thinking bound to its prefix, then the block is swapped in; every request accepted', async () => {
    const { fake, sdk } = await gateway()
    let step = 0
    fake.fallback = (r) =>
      isSummaryCall(r)
        ? { toolInput: { objective: 'Fix the failing parser test (background)' }, delayMs: 300 }
        : { content: [{ type: 'tool_use', id: `toolu_bg_${++step}`, name: 'bash', input: { command: `ls ${step}` } }] }
    const thinking = { type: 'adaptive' } as unknown as Anthropic.Beta.Messages.BetaThinkingConfigParam
    const conversation: Beta[] = [{ role: 'user', content: 'Fix the failing parser test in src/parse.ts' }]
    const turn = async (): Promise<void> => {
      const answer = await sdk.beta.messages.create({ model: 'claude-opus-5-5', max_tokens: 1_024, thinking, messages: conversation, betas: [BETA] })
      conversation.push({ role: 'assistant', content: answer.content as Anthropic.Beta.Messages.BetaContentBlockParam[] })
      const use = answer.content.find((b) => b.type === 'tool_use')
      conversation.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use?.id ?? '', content: `listing ${step}` }] })
    }
    for (let i = 0; i < 4; i++) await turn()
    // the compaction request, with the history as it stands; the conversation goes on meanwhile
    const sentCount = conversation.length
    const compacting = sdk.beta.messages.create({
      model: 'claude-opus-5-5',
      max_tokens: 1_024,
      thinking,
      messages: [...conversation],
      compaction: { type: 'summarize' },
      betas: [BETA]
    })
    for (let i = 0; i < 3; i++) await turn()
    const block = await compacting
    expect(block.stop_reason).toBe('compaction')
    // swapped: exactly the messages sent replaced by the returned message, the turns since after it
    conversation.splice(0, sentCount, { role: 'assistant', content: block.content as Anthropic.Beta.Messages.BetaContentBlockParam[] })
    for (let i = 0; i < 3; i++) await turn()
    expect(fake.refused).toEqual([])
    const last = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)
    expect(JSON.stringify(last?.body.messages)).toContain('Fix the failing parser test (background)')
  })

  it('streams the block as the API streams one', async () => {
    const { sdk } = await gateway()
    const stream = sdk.beta.messages.stream({
      model: 'claude-any',
      max_tokens: 1_024,
      messages: history(8) as Beta[],
      compaction: { type: 'summarize' },
      betas: [BETA]
    })
    const message = await stream.finalMessage()
    expect(message.stop_reason).toBe('compaction')
    const block = compactionOf(message.content)
    expect(block.content).toContain('Fix the failing parser test')
    expect(String(block.encrypted_content)).toMatch(/^cgw2\./)
  })

  it("is written by the client's own model with its own key where the gateway has none, the instructions in its request", async () => {
    const { fake, sdk } = await gateway({}, false)
    const { data, response } = await sdk.beta.messages
      .create({
        model: 'claude-any',
        max_tokens: 1_024,
        messages: history(10) as Beta[],
        compaction: { type: 'summarize', instructions: INSTRUCTIONS },
        betas: [BETA]
      })
      .withResponse()
    expect(compactionOf(data.content).content).toContain('(by the client model)')
    expect(response.headers.get('x-compaction-summarizer')).toBe('anthropic')
    const call = fake.requests.find(isClientSummaryCall)
    // with the client's own credentials
    expect(call?.headers['x-api-key'] ?? call?.headers.authorization).toContain(UPSTREAM_KEY)
    expect(JSON.stringify(call?.body.messages.at(-1))).toContain('Keep every file path and the failing test names')
    // the summary call is no compaction request of its own
    expect(call?.body.compaction).toBeUndefined()
  })

  it("says so where no model could write it: extractive, labelled in the answer's headers", async () => {
    const { sdk } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    const { data, response } = await sdk.beta.messages
      .create({ model: 'claude-any', max_tokens: 1_024, messages: history(10) as Beta[], compaction: { type: 'summarize' }, betas: [BETA] })
      .withResponse()
    expect(data.stop_reason).toBe('compaction')
    expect(response.headers.get('x-compaction-summarizer')).toBe('extractive')
  })

  it('refuses what the API refuses, naming the field', async () => {
    const { fake, sdk } = await gateway()
    const base = { model: 'claude-any', max_tokens: 64, messages: history(3) as Beta[] }
    const refused = async (params: Record<string, unknown>, betas: string[] = [BETA]): Promise<string> => {
      const err = await sdk.beta.messages
        .create({ ...base, ...params, betas } as Anthropic.Beta.Messages.MessageCreateParamsNonStreaming)
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(Anthropic.BadRequestError)
      return (err as Error).message
    }
    expect(await refused({ compaction: { type: 'summarize' }, context_management: { edits: [] } })).toMatch(
      /compaction: cannot be combined with `context_management`/
    )
    expect(await refused({ compaction: { type: 'summarize' } }, [])).toMatch(/compaction: Extra inputs are not permitted/)
    expect(await refused({ compaction: { type: 'compact' } })).toMatch(/compaction\.type: Input should be 'summarize'/)
    expect(await refused({ compaction: { type: 'summarize', trigger: 5 } })).toMatch(/compaction\.trigger: Extra inputs/)
    const open = [...history(3), { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_open', name: 'bash', input: { command: 'ls' } }] }]
    expect(await refused({ compaction: { type: 'summarize' }, messages: open })).toMatch(
      /messages\.7: the messages to compact end in an assistant turn whose tool call has no result/
    )
    expect(fake.requests).toEqual([])
  })

  it('GET /v1/models says each model has compaction on demand where the gateway answers it, and leaves the list as it came where the upstream does', async () => {
    const { sdk } = await gateway()
    const models = []
    for await (const m of sdk.beta.models.list()) models.push(m)
    expect(models.map((m) => m.id)).toEqual(['claude-test'])
    expect((models[0] as unknown as { capabilities: { compaction: unknown } }).capabilities.compaction).toEqual({
      supported: true,
      summarize: { supported: true }
    })
    const forward = await gateway({ COMPACT_CONTEXT_MANAGEMENT: 'forward' })
    const listed = []
    for await (const m of forward.sdk.beta.models.list()) listed.push(m)
    expect((listed[0] as unknown as { capabilities?: unknown }).capabilities).toBeUndefined()
  })

  it('is forwarded as sent to an upstream that has it (COMPACT_CONTEXT_MANAGEMENT=forward); a token count ignores it', async () => {
    const { fake, sdk } = await gateway({ COMPACT_CONTEXT_MANAGEMENT: 'forward' })
    fake.contextManagement = true
    await sdk.beta.messages.create({ model: 'claude-any', max_tokens: 64, messages: history(3) as Beta[], compaction: { type: 'summarize' }, betas: [BETA] })
    expect(fake.requests.at(-1)?.body.compaction).toEqual({ type: 'summarize' })
    const counting = await gateway()
    await counting.sdk.beta.messages.countTokens({
      model: 'claude-any',
      messages: history(3) as Beta[],
      compaction: { type: 'summarize' },
      betas: [BETA]
    } as Anthropic.Beta.Messages.MessageCountTokensParams)
    expect(counting.fake.requests.at(-1)?.path).toContain('count_tokens')
    expect(counting.fake.requests.at(-1)?.body.compaction).toBeUndefined()
  })
})
