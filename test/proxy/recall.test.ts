import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { type Message, PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import { RECALL_TOOL_DEFINITION } from '../../src/proxy/recall-tool.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, type FakeReply, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'

/**
 * The proxy's recall tool through the real SDK against a fake Messages API that refuses what the API
 * refuses (tool pairing, thinking bound to its prefix): offered once the gateway rewrites a conversation,
 * its calls answered by the gateway and the turn continued upstream, the client given one answer without
 * a trace of it, and the next request rebuilt with what the upstream saw.
 */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

const SESSION = { 'x-compaction-session': 'recall-session' }
const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'

async function gateway(env: Record<string, string> = {}): Promise<{ fake: FakeAnthropic; sdk: Anthropic }> {
  const fake = await new FakeAnthropic().start()
  opened.push(fake)
  const app = await testApp({ ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'sk-ant-upstream-recall-0000000000000', COMPACT_BUDGET: '8000', ...env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const sdk = new Anthropic({ apiKey: 'unused-client-key', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
  return { fake, sdk }
}

/** A session whose early log printed one plain line the task needs later, long enough that asking for it crosses the budget. */
function history(): Anthropic.Messages.MessageParam[] {
  const log = [...Array.from({ length: 200 }, (_, i) => `INFO worker ${i} ready`), CODENAME_LINE, 'INFO done'].join('\n')
  const messages: Message[] = [user('Deploy the service and watch the log'), ...shellStep('toolu_log', 'cat deploy.log', log), assistant('The workers are up.')]
  for (let i = 0; i < 12; i++)
    messages.push(
      user(`Refactor module ${i}`),
      ...shellStep(`toolu_m${i}`, `cat src/m${i}.ts`, `module ${i}\n${'x'.repeat(4_000)}`),
      assistant(`Module ${i} is done.`)
    )
  messages.push(user('What is the rollout codename? Put it in the release notes.'))
  return messages as Anthropic.Messages.MessageParam[]
}

const blocks = (m: { content: unknown } | undefined): Record<string, unknown>[] => (Array.isArray(m?.content) ? (m.content as Record<string, unknown>[]) : [])
const offered = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === PROXY_RECALL_TOOL)
/** The recall result the request's last message holds, if any. */
const recallResultOf = (r: ReceivedRequest): string | undefined => {
  const found = blocks(r.body.messages.at(-1)).find((b) => b.type === 'tool_result' && String(b.tool_use_id).startsWith('toolu_recall'))
  return found === undefined ? undefined : JSON.stringify(found.content)
}

/** A value without its cache marks. */
const withoutMarks = (value: unknown): unknown => JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === 'cache_control' ? undefined : v)))

let calls = 0
const recallCall = (query = 'rollout codename'): Record<string, unknown> => ({
  type: 'tool_use',
  id: `toolu_recall_${++calls}`,
  name: PROXY_RECALL_TOOL,
  input: { query }
})

/** The model: with the tool, asks for the codename; given a result, answers with what it found. */
function model(r: ReceivedRequest, beside?: Record<string, unknown>): FakeReply {
  const found = recallResultOf(r)
  if (found !== undefined) return { text: `The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.` }
  if (offered(r) && JSON.stringify(r.body.messages.at(-1)).includes('rollout codename'))
    return { content: [{ type: 'text', text: 'Let me look that up.' }, ...(beside ? [beside] : []), recallCall()] as FakeReply['content'] }
  return { text: 'ok' }
}

describe("the proxy's recall tool (Messages API)", () => {
  it('is offered from the crossing on, answered by the gateway, the turn continued upstream; the client gets one answer with the exact line used', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => model(r)
    const messages = history()
    const { data, response } = await sdk.messages.create({ model: 'claude-test', max_tokens: 256, messages }, { headers: SESSION }).withResponse()
    expect(fake.refused).toEqual([])
    expect(response.headers.get('x-compaction')).toBe('compacted')
    expect(response.headers.get('x-compaction-recall-tool')).toBe(PROXY_RECALL_TOOL)
    // the client's answer: the text of both rounds, no recall call
    expect(data.content).toEqual([
      { type: 'text', text: 'Let me look that up.' },
      { type: 'text', text: 'The codename is bluefin-7.' }
    ])
    expect(data.stop_reason).toBe('end_turn')
    // the upstream: the crossing with the tool after the client's tools, then the continuation with the call and its result
    const [crossing, continued] = fake.requests.slice(-2) as [ReceivedRequest, ReceivedRequest]
    expect(crossing.body.tools.at(-1)).toEqual(RECALL_TOOL_DEFINITION)
    expect(JSON.stringify(crossing.body.messages[0])).toContain(`call the \`${PROXY_RECALL_TOOL}\` tool`)
    expect(continued.body.messages.slice(0, -2)).toEqual(crossing.body.messages)
    expect(blocks(continued.body.messages.at(-2)).map((b) => b.type)).toEqual(['text', 'tool_use'])
    expect(recallResultOf(continued)).toContain(CODENAME_LINE)
    expect(continued.body.tools).toEqual(crossing.body.tools)
    // both rounds billed
    expect(data.usage.output_tokens).toBeGreaterThan(0)

    // the next request: the upstream sees its own rounds where the client's answer stands
    messages.push({ role: 'assistant', content: data.content }, { role: 'user', content: 'Thanks. Now tag the release.' })
    await sdk.messages.create({ model: 'claude-test', max_tokens: 256, messages }, { headers: SESSION })
    expect(fake.refused).toEqual([])
    const next = fake.requests.at(-1)!
    // (the continuation marked its last block for the cache, where the request had room: not part of what is kept)
    expect(blocks(continued.body.messages.at(-1)).at(-1)?.cache_control).toEqual({ type: 'ephemeral' })
    const unmarked = (m: { role: string; content: unknown }): unknown => ({
      ...m,
      content: blocks(m).map(({ cache_control: _mark, ...b }) => b)
    })
    const rounds = [...continued.body.messages.slice(-2).map(unmarked), { role: 'assistant', content: [{ type: 'text', text: 'The codename is bluefin-7.' }] }]
    const at = next.body.messages.findIndex((m) => JSON.stringify(m) === JSON.stringify(rounds[0]))
    expect(at).toBeGreaterThan(0)
    expect(next.body.messages.slice(at, at + 3)).toEqual(rounds)
    expect(next.body.messages.slice(0, at)).toEqual(continued.body.messages.slice(0, at))
    expect(next.body.tools).toEqual(crossing.body.tools)
  })

  it('streams what comes before the call at once and the continuation into the same answer, renumbered; the SDK reads one message', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => model(r)
    const stream = sdk.messages.stream({ model: 'claude-test', max_tokens: 256, messages: history() }, { headers: SESSION })
    const events: string[] = []
    stream.on('streamEvent', (e) => events.push(e.type === 'content_block_start' ? `start:${e.index}:${e.content_block.type}` : e.type))
    const final = await stream.finalMessage()
    expect(fake.refused).toEqual([])
    expect(final.content).toEqual([
      { type: 'text', text: 'Let me look that up.' },
      { type: 'text', text: 'The codename is bluefin-7.' }
    ])
    expect(final.stop_reason).toBe('end_turn')
    // one message_start, the blocks 0 and 1, a keep-alive while the gateway searched, one close
    expect(events.filter((e) => e === 'message_start')).toHaveLength(1)
    expect(events.filter((e) => e.startsWith('start:'))).toEqual(['start:0:text', 'start:1:text'])
    expect(events.filter((e) => e === 'message_stop')).toHaveLength(1)
    expect(events.indexOf('start:1:text')).toBeGreaterThan(events.indexOf('ping'))
  })

  it("gives the client its own calls when the model calls the recall beside them, and puts the recall's exchange back on the next request", async () => {
    const { fake, sdk } = await gateway()
    const bash = { type: 'tool_use', id: 'toolu_client_ls', name: 'bash', input: { command: 'ls' } }
    fake.fallback = (r) => model(r, bash)
    const messages = history()
    const tools: Anthropic.Messages.Tool[] = [
      { name: 'bash', description: 'Runs a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }
    ]
    const first = await sdk.messages.create({ model: 'claude-test', max_tokens: 256, messages, tools }, { headers: SESSION })
    expect(first.content.map((b) => b.type)).toEqual(['text', 'tool_use'])
    expect(first.stop_reason).toBe('tool_use')
    expect(first.content.some((b) => b.type === 'tool_use' && b.name === PROXY_RECALL_TOOL)).toBe(false)
    const crossing = fake.requests.at(-1)!
    messages.push(
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_client_ls', content: 'a.ts' }] }
    )
    await sdk.messages.create({ model: 'claude-test', max_tokens: 256, messages, tools }, { headers: SESSION })
    expect(fake.refused).toEqual([])
    const next = fake.requests.at(-1)!
    // the model's own answer, both calls, then both results: the recall's first, as the gateway found it
    const last = next.body.messages.slice(-2)
    expect(blocks(last[0]).map((b) => b.name ?? b.type)).toEqual(['text', 'bash', PROXY_RECALL_TOOL])
    expect(blocks(last[1]).map((b) => b.tool_use_id)).toEqual([blocks(last[0])[2]!.id, 'toolu_client_ls'])
    expect(JSON.stringify(blocks(last[1])[0])).toContain(CODENAME_LINE)
    expect(next.body.tools).toEqual(crossing.body.tools)
  })

  it('answers three rounds, says the budget is spent at a fourth call, and ends the turn as a normal answer if the model calls again', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => (offered(r) ? { content: [recallCall(`query ${calls}`)] as FakeReply['content'] } : { text: 'ok' })
    const answer = await sdk.messages.create({ model: 'claude-test', max_tokens: 256, messages: history() }, { headers: SESSION })
    expect(fake.refused).toEqual([])
    const turn = fake.requests.filter(offered)
    expect(turn).toHaveLength(5)
    const results = turn.slice(1).map((r) => recallResultOf(r) ?? '')
    expect(results.slice(0, 2).every((t) => !t.includes('last'))).toBe(true)
    expect(results[2]).toContain(`last ${PROXY_RECALL_TOOL} this turn`)
    expect(results[3]).toContain('budget of 3')
    expect(answer.stop_reason).toBe('end_turn')
    expect(answer.content.some((b) => b.type === 'tool_use')).toBe(false)
    expect(answer.content.length).toBeGreaterThan(0)
  })

  it('ends the turn as a normal answer, never a 5xx, when the continuation fails; streamed and not', async () => {
    for (const stream of [false, true]) {
      const { fake, sdk } = await gateway()
      fake.fallback = (r) => (recallResultOf(r) !== undefined ? { status: 500 } : model(r))
      const request = { model: 'claude-test', max_tokens: 256, messages: history() }
      const answer = stream ? await sdk.messages.stream(request, { headers: SESSION }).finalMessage() : await sdk.messages.create(request, { headers: SESSION })
      expect(answer.content.map((b) => (b.type === 'text' ? b.text : b.type))).toEqual(['Let me look that up.'])
      expect(answer.stop_reason).toBe('end_turn')
    }
  })

  it('is never offered where the client has a tool of that name, and nothing names it then', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = { text: 'ok' }
    const own: Anthropic.Messages.Tool = { name: PROXY_RECALL_TOOL, description: 'the client’s own', input_schema: { type: 'object', properties: {} } }
    const { response } = await sdk.messages
      .create({ model: 'claude-test', max_tokens: 64, messages: history(), tools: [own] }, { headers: SESSION })
      .withResponse()
    expect(response.headers.get('x-compaction')).toBe('compacted')
    expect(response.headers.get('x-compaction-recall-tool')).toBeNull()
    const sent = fake.requests.at(-1)!
    expect(sent.body.tools).toEqual([own])
    expect(JSON.stringify(sent.body.messages[0])).not.toContain('tool with a few words')
  })

  it('sends the upstream, turn after turn, its own last request and answer as the next prefix, whatever the model calls (property)', async () => {
    // each turn the model answers, calls the recall tool, calls it beside a client's tool, or calls it twice
    const turn = fc.constantFrom('text', 'recall', 'beside', 'twice')
    let compared = 0
    await fc.assert(
      fc.asyncProperty(fc.array(turn, { minLength: 2, maxLength: 5 }), fc.boolean(), async (turns, stream) => {
        const { fake, sdk } = await gateway()
        let kind = 'text'
        let rounds = 0
        const answers = new Map<ReceivedRequest, unknown>()
        fake.fallback = (r) => {
          const done = recallResultOf(r) !== undefined && rounds >= (kind === 'twice' ? 2 : 1)
          let content: Record<string, unknown>[]
          if (!offered(r) || kind === 'text' || done) content = [{ type: 'text', text: `Turn done after ${rounds} rounds.` }]
          else {
            rounds++
            content = [...(kind === 'beside' ? [{ type: 'tool_use', id: `toolu_client_${calls}`, name: 'bash', input: { command: 'ls' } }] : []), recallCall()]
          }
          answers.set(r, content)
          return { content: content as FakeReply['content'] }
        }
        const tools: Anthropic.Messages.Tool[] = [{ name: 'bash', description: 'Runs a command', input_schema: { type: 'object', properties: {} } }]
        const messages = history()
        let last: { messages: unknown[]; answer: unknown } | undefined
        for (const next of turns) {
          kind = next
          rounds = 0
          const before = fake.requests.length
          const request = { model: 'claude-test', max_tokens: 256, messages, tools }
          const answer = stream
            ? await sdk.messages.stream(request, { headers: SESSION }).finalMessage()
            : await sdk.messages.create(request, { headers: SESSION })
          expect(fake.refused).toEqual([])
          const sent = fake.requests.slice(before)
          const first = sent[0]!.body.messages
          // what the upstream last saw and the answer it gave, byte for byte but for where the cache marks stand, which
          // clients move every turn (unless a crossing rewrote the prefix)
          if (last && JSON.stringify(first[0]) === JSON.stringify(last.messages[0])) {
            expect(withoutMarks(first.slice(0, last.messages.length + 1))).toEqual(withoutMarks([...last.messages, last.answer]))
            compared++
          }
          const final = sent.at(-1)!
          last = { messages: final.body.messages, answer: { role: 'assistant', content: answers.get(final) } }
          expect(JSON.stringify(answer.content)).not.toContain(PROXY_RECALL_TOOL)
          messages.push({ role: 'assistant', content: answer.content as Anthropic.Messages.ContentBlockParam[] })
          const client = answer.content.find((b) => b.type === 'tool_use')
          messages.push({ role: 'user', content: client ? [{ type: 'tool_result', tool_use_id: client.id, content: 'a.ts' }] : `Go on (${messages.length}).` })
        }
        for (const o of opened.splice(0).reverse()) await o.close()
      }),
      { numRuns: 8 }
    )
    // (turns after a crossing compare against the turn before them: most do)
    expect(compared).toBeGreaterThan(8)
  }, 120_000)

  it('keeps thinking blocks and their signatures exactly as they came: every round and the next request pass the prefix check', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => model(r)
    const thinking = { type: 'adaptive' } as unknown as Anthropic.Messages.ThinkingConfigParam
    const messages = history()
    const first = await sdk.messages.create({ model: 'claude-fable-5-2', max_tokens: 2_048, thinking, messages }, { headers: SESSION })
    expect(fake.refused).toEqual([])
    expect(first.content.filter((b) => b.type === 'thinking')).toHaveLength(2)
    messages.push({ role: 'assistant', content: first.content as Anthropic.Messages.ContentBlockParam[] }, { role: 'user', content: 'Go on.' })
    await sdk.messages.create({ model: 'claude-fable-5-2', max_tokens: 2_048, thinking, messages }, { headers: SESSION })
    expect(fake.refused).toEqual([])
    expect(fake.thinkingDropped).toBe(0)
  })
})
