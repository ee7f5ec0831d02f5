import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import { afterEach, describe, expect, it } from 'vitest'
import { PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import { CHAT_RECALL_TOOL_DEFINITION } from '../../src/proxy/recall-tool.js'
import { ChatRound, type ChatExchange, chatFingerprint, parseChunks, restoreChat } from '../../src/proxy/recall-chat.js'
import { testApp } from '../helpers/app.js'
import { FakeOpenAi, type FakeOpenAiReply, type OpenAiRequest } from '../helpers/fake-openai.js'

/**
 * The proxy's recall tool on Chat Completions, through the real openai SDK against a fake that refuses what
 * the API refuses (tool messages that answer no call, calls left unanswered): offered from the crossing on,
 * answered by the gateway, the turn continued upstream, the client given one answer, the next request rebuilt.
 */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

type Item = Record<string, unknown>
const SESSION = { 'x-compaction-session': 'recall-chat-session' }
const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'

async function gateway(): Promise<{ fake: FakeOpenAi; sdk: OpenAI }> {
  const fake = await new FakeOpenAi().start()
  opened.push(fake)
  const app = await testApp({ OPENAI_API_KEY: 'sk-openai-upstream-recall-00000', OPENAI_BASE_URL: `${fake.url}/v1`, COMPACT_BUDGET: '8000' })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  return { fake, sdk: new OpenAI({ apiKey: 'unused-client-key', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`, maxRetries: 0 }) }
}

/** A session whose early log printed the line the task needs later, long enough that asking for it crosses the budget. */
function history(): OpenAI.Chat.ChatCompletionMessageParam[] {
  const log = [...Array.from({ length: 200 }, (_, i) => `INFO worker ${i} ready`), CODENAME_LINE, 'INFO done'].join('\n')
  const items: Item[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Deploy the service and watch the log' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_log', type: 'function', function: { name: 'shell', arguments: '{"cmd":"cat deploy.log"}' } }]
    },
    { role: 'tool', tool_call_id: 'call_log', content: log }
  ]
  for (let i = 0; i < 12; i++)
    items.push(
      { role: 'user', content: `Refactor module ${i}` },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `call_m${i}`, type: 'function', function: { name: 'shell', arguments: `{"cmd":"cat m${i}.ts"}` } }]
      },
      { role: 'tool', tool_call_id: `call_m${i}`, content: `module ${i}\n${'x'.repeat(4_000)}` },
      { role: 'assistant', content: `Module ${i} is done.` }
    )
  items.push({ role: 'user', content: 'What is the rollout codename? Put it in the release notes.' })
  return items as unknown as OpenAI.Chat.ChatCompletionMessageParam[]
}

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'shell', description: 'Runs a command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } } }
]
const offered = (r: OpenAiRequest): boolean => (r.body.tools ?? []).some((t) => t.function.name === PROXY_RECALL_TOOL)
const recallResult = (r: OpenAiRequest): string | undefined => {
  const found = r.body.messages.find((m) => m.role === 'tool' && String(m.tool_call_id).startsWith('call_recall'))
  return found === undefined ? undefined : String(found.content)
}

/** The model: with the tool, asks for the codename (beside a call of the client's where told); given the result, answers with it. */
function model(r: OpenAiRequest, beside = false): FakeOpenAiReply {
  const found = recallResult(r)
  if (found !== undefined && r.body.messages.at(-1)?.role === 'tool')
    return { text: `The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.` }
  if (offered(r) && JSON.stringify(r.body.messages.at(-1)).includes('rollout codename'))
    return {
      toolCalls: [
        ...(beside ? [{ id: 'call_client_ls', name: 'shell', arguments: '{"cmd":"ls"}' }] : []),
        { id: 'call_recall_1', name: PROXY_RECALL_TOOL, arguments: JSON.stringify({ query: 'rollout codename' }) }
      ]
    }
  return { text: 'ok' }
}

describe("the proxy's recall tool (Chat Completions)", () => {
  for (const stream of [false, true]) {
    it(`answers the model's call and continues the turn; the client gets one answer with the line used, and the next request the rounds (${stream ? 'streamed' : 'not streamed'})`, async () => {
      const { fake, sdk } = await gateway()
      fake.fallback = (r) => model(r)
      const messages = history()
      let content: string | null | undefined
      if (stream) {
        const s = sdk.chat.completions.stream({ model: 'gpt-test', messages, tools, stream_options: { include_usage: true } }, { headers: SESSION })
        const final = await s.finalChatCompletion()
        content = final.choices[0]?.message.content
        expect(final.choices[0]?.message.tool_calls ?? []).toEqual([])
        expect(final.choices[0]?.finish_reason).toBe('stop')
        expect(final.usage?.completion_tokens).toBeGreaterThan(0)
      } else {
        const { data, response } = await sdk.chat.completions.create({ model: 'gpt-test', messages, tools }, { headers: SESSION }).withResponse()
        expect(response.headers.get('x-compaction-recall-tool')).toBe(PROXY_RECALL_TOOL)
        content = data.choices[0]?.message.content
        expect(data.choices[0]?.message.tool_calls ?? []).toEqual([])
        expect(data.choices[0]?.finish_reason).toBe('stop')
      }
      expect(content).toBe('The codename is bluefin-7.')
      const [crossing, continued] = fake.requests.slice(-2) as [OpenAiRequest, OpenAiRequest]
      expect(crossing.body.tools?.at(-1)).toEqual(CHAT_RECALL_TOOL_DEFINITION)
      expect(continued.body.messages.slice(0, -2)).toEqual(crossing.body.messages)
      expect(recallResult(continued)).toContain(CODENAME_LINE)
      // the next request: the upstream sees its own rounds where the client's answer stands
      messages.push({ role: 'assistant', content: content ?? null }, { role: 'user', content: 'Thanks. Now tag the release.' })
      fake.fallback = { text: 'Tagged.' }
      await sdk.chat.completions.create({ model: 'gpt-test', messages, tools }, { headers: SESSION })
      const next = fake.requests.at(-1)!
      const rounds = continued.body.messages.slice(-2)
      const at = next.body.messages.findIndex((m) => JSON.stringify(m) === JSON.stringify(rounds[0]))
      expect(at).toBeGreaterThan(0)
      expect(next.body.messages.slice(at, at + 2)).toEqual(rounds)
      // the last round's message as the upstream gave it
      expect(next.body.messages[at + 2]).toMatchObject({ role: 'assistant', content: 'The codename is bluefin-7.' })
      expect(next.body.tools).toEqual(crossing.body.tools)
    })
  }

  it('gives the client its own call when the model calls the recall beside it, and answers both on the next request, the recall first', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => model(r, true)
    const messages = history()
    const first = await sdk.chat.completions.create({ model: 'gpt-test', messages, tools }, { headers: SESSION })
    const message = first.choices[0]!.message
    expect(message.tool_calls?.map((c) => (c.type === 'function' ? c.function.name : c.type))).toEqual(['shell'])
    expect(first.choices[0]?.finish_reason).toBe('tool_calls')
    messages.push({ role: 'assistant', content: message.content, tool_calls: message.tool_calls } as OpenAI.Chat.ChatCompletionMessageParam, {
      role: 'tool',
      tool_call_id: 'call_client_ls',
      content: 'a.ts'
    })
    fake.fallback = { text: 'Listed.' }
    await sdk.chat.completions.create({ model: 'gpt-test', messages, tools }, { headers: SESSION })
    const next = fake.requests.at(-1)!
    const tail = next.body.messages.slice(-3)
    expect(tail.map((m) => m.role)).toEqual(['assistant', 'tool', 'tool'])
    expect(tail[0]?.tool_calls?.map((c) => c.function.name)).toEqual(['shell', PROXY_RECALL_TOOL])
    expect(tail.slice(1).map((m) => m.tool_call_id)).toEqual(['call_recall_1', 'call_client_ls'])
    expect(String(tail[1]?.content)).toContain(CODENAME_LINE)
  })
})

describe('a Chat Completions round', () => {
  const chunk = (delta: Item, finish: string | null = null): string =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

  it('passes text and the client’s calls on (renumbered from where the client is), holds the recall call and the close, and keeps the round whole', () => {
    const upstream = [
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Looking.' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_r', type: 'function', function: { name: PROXY_RECALL_TOOL, arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"query":"x"}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_c', type: 'function', function: { name: 'shell', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '{"cmd":"ls"}' } }] }),
      chunk({}, 'tool_calls'),
      'data: [DONE]\n\n'
    ].join('')
    const round = new ChatRound(2, true)
    const out = parseChunks(upstream)
      .flatMap((c) => round.take(c))
      .join('')
    const deltas = parseChunks(out).map((c) => (c.kind === 'data' ? ((c.data.choices as Item[])[0]?.delta as Item) : c.kind))
    expect(JSON.stringify(deltas)).not.toContain(PROXY_RECALL_TOOL)
    expect(deltas).toContainEqual({ content: '\n\nLooking.' })
    expect(deltas).toContainEqual({ tool_calls: [{ index: 2, id: 'call_c', type: 'function', function: { name: 'shell', arguments: '' } }] })
    expect(deltas).not.toContain('done')
    expect(round.finish).toBeDefined()
    expect(round.message()).toEqual({
      role: 'assistant',
      content: 'Looking.',
      tool_calls: [
        { id: 'call_r', type: 'function', function: { name: PROXY_RECALL_TOOL, arguments: '{"query":"x"}' } },
        { id: 'call_c', type: 'function', function: { name: 'shell', arguments: '{"cmd":"ls"}' } }
      ]
    })
    expect(round.clientCalls).toBe(3)
  })

  it('puts an exchange back at its place: its rounds where the answer stood, its pending results right after them', () => {
    const answer = { role: 'assistant', content: 'Looking.', tool_calls: [{ id: 'call_c', type: 'function', function: { name: 'shell', arguments: '{}' } }] }
    const exchange: ChatExchange = {
      at: 1,
      visible: chatFingerprint(answer),
      rounds: [{ ...answer, tool_calls: [...answer.tool_calls, { id: 'call_r', type: 'function', function: { name: PROXY_RECALL_TOOL, arguments: '{}' } }] }],
      pending: [{ role: 'tool', tool_call_id: 'call_r', content: 'found' }]
    }
    const items: Item[] = [{ role: 'user', content: 'go' }, answer, { role: 'tool', tool_call_id: 'call_c', content: 'a.ts' }]
    expect(restoreChat(items, [exchange]).items).toEqual([items[0], exchange.rounds[0], exchange.pending[0], items[2]])
    // the same answer elsewhere is another
    expect(restoreChat([items[0]!, items[0]!, answer], [exchange]).restored).toBe(0)
  })
})
