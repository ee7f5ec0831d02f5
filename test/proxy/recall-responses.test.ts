import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import {
  RESPONSES_RECALL_TOOL_DEFINITION,
  type ResponsesExchange,
  ResponsesRound,
  parseResponsesEvents,
  responsesFingerprint,
  restoreResponses
} from '../../src/proxy/recall-responses.js'
import { testApp } from '../helpers/app.js'
import { FakeOpenAi, type FakeOpenAiReply, type OpenAiRequest, responsesRefusal } from '../helpers/fake-openai.js'

/**
 * The proxy's recall tool on the Responses API, through the real openai SDK against a fake that refuses what
 * the API refuses (an output that answers no call, a call no output answers, an item with an id where nothing
 * is stored, reasoning without its encrypted content): offered from the crossing on, answered by the gateway,
 * the turn continued upstream with the round's items as they came, the client given one answer, the next
 * request rebuilt.
 */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

type Item = Record<string, unknown>
const SESSION = { 'x-compaction-session': 'recall-responses-session' }
const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'

async function gateway(): Promise<{ fake: FakeOpenAi; sdk: OpenAI }> {
  const fake = await new FakeOpenAi().start()
  opened.push(fake)
  const app = await testApp({ OPENAI_API_KEY: 'sk-openai-upstream-recall-00000', OPENAI_BASE_URL: `${fake.url}/v1`, COMPACT_BUDGET: '8000' })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  return { fake, sdk: new OpenAI({ apiKey: 'unused-client-key', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`, maxRetries: 0 }) }
}

/** A Codex-shaped session (no item ids, encrypted reasoning) whose early log printed the line the task needs later. */
function history(): Item[] {
  const log = [...Array.from({ length: 200 }, (_, i) => `INFO worker ${i} ready`), CODENAME_LINE, 'INFO done'].join('\n')
  const items: Item[] = [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are a coding agent.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Deploy the service and watch the log' }] },
    { type: 'reasoning', summary: [], encrypted_content: 'gAAAAB-log' },
    { type: 'function_call', call_id: 'call_log', name: 'shell', arguments: '{"cmd":"cat deploy.log"}' },
    { type: 'function_call_output', call_id: 'call_log', output: log }
  ]
  for (let i = 0; i < 12; i++)
    items.push(
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: `Refactor module ${i}` }] },
      { type: 'function_call', call_id: `call_m${i}`, name: 'shell', arguments: `{"cmd":"cat m${i}.ts"}` },
      { type: 'function_call_output', call_id: `call_m${i}`, output: `module ${i}\n${'x'.repeat(4_000)}` },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `Module ${i} is done.` }] }
    )
  items.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What is the rollout codename? Put it in the release notes.' }] })
  return items
}

const tools = [
  { type: 'function', name: 'shell', description: 'Runs a command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } }, strict: false }
]
const inputOf = (r: OpenAiRequest): Item[] => r.body.input as Item[]
const offered = (r: OpenAiRequest): boolean => ((r.body.tools ?? []) as unknown as Item[]).some((t) => t.name === PROXY_RECALL_TOOL)
const recallOutput = (r: OpenAiRequest): string | undefined => {
  const found = inputOf(r).find((i) => i.type === 'function_call_output' && String(i.call_id).startsWith('call_recall'))
  return found === undefined ? undefined : String(found.output)
}
const message = (text: string, id = 'msg_answer'): Item => ({
  type: 'message',
  id,
  status: 'completed',
  role: 'assistant',
  content: [{ type: 'output_text', text, annotations: [] }]
})

/** The model: with the tool, reasons then asks for the codename (beside a call of the client's where told); given the result, answers with it. */
function model(r: OpenAiRequest, beside = false): FakeOpenAiReply {
  const found = recallOutput(r)
  if (found !== undefined && inputOf(r).at(-1)?.type === 'function_call_output')
    return { output: [message(`The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.`)] }
  if (offered(r) && JSON.stringify(inputOf(r).at(-1)).includes('rollout codename'))
    return {
      output: [
        { type: 'reasoning', id: 'rs_recall', summary: [], encrypted_content: 'gAAAAB-recall' },
        ...(beside
          ? [{ type: 'function_call', id: 'fc_client', status: 'completed', call_id: 'call_client_ls', name: 'shell', arguments: '{"cmd":"ls"}' }]
          : []),
        {
          type: 'function_call',
          id: 'fc_recall',
          status: 'completed',
          call_id: 'call_recall_1',
          name: PROXY_RECALL_TOOL,
          arguments: JSON.stringify({ query: 'rollout codename' })
        }
      ]
    }
  return { output: [message('ok')] }
}

describe("the proxy's recall tool (Responses API)", () => {
  it('has a fake that refuses what the API refuses of a continuation: a call left unanswered', () => {
    const call = { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{}' }
    expect(responsesRefusal(JSON.stringify({ model: 'm', input: [call] }))).toMatch(/No tool output found for function call c1/)
    expect(
      responsesRefusal(JSON.stringify({ model: 'm', store: false, input: [call, { type: 'function_call_output', call_id: 'c1', output: 'x' }] }))
    ).toBeUndefined()
  })

  for (const stream of [false, true]) {
    it(`answers the model's call and continues the turn; the client gets one answer with the line used, and the next request the rounds (${stream ? 'streamed' : 'not streamed'})`, async () => {
      const { fake, sdk } = await gateway()
      fake.fallback = (r) => model(r)
      const input = history()
      const body = { model: 'gpt-test', store: false, input, tools } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming
      let output: OpenAI.Responses.ResponseOutputItem[]
      if (stream) {
        const s = sdk.responses.stream({ ...body, stream: true } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming, { headers: SESSION })
        const kinds: string[] = []
        s.on('event', (e) => kinds.push(e.type))
        const final = await s.finalResponse()
        output = final.output
        // one response told of, items numbered from 0, the close once
        expect(kinds.filter((k) => k === 'response.created')).toHaveLength(1)
        expect(kinds.filter((k) => k === 'response.completed')).toHaveLength(1)
        expect(final.usage?.output_tokens).toBeGreaterThan(10)
      } else {
        const { data, response } = await sdk.responses.create(body, { headers: SESSION }).withResponse()
        expect(response.headers.get('x-compaction-recall-tool')).toBe(PROXY_RECALL_TOOL)
        output = data.output
      }
      expect(JSON.stringify(output)).not.toContain(PROXY_RECALL_TOOL)
      const said = output.filter((o): o is OpenAI.Responses.ResponseOutputMessage => o.type === 'message')
      expect(said.map((m) => (m.content[0] as { text: string }).text)).toEqual(['The codename is bluefin-7.'])
      // the reasoning of the first round is the client's too: it sends it back
      expect(output.map((o) => o.type)).toEqual(['reasoning', 'message'])
      expect(fake.refused).toEqual([])
      const [crossing, continued] = fake.requests.slice(-2) as [OpenAiRequest, OpenAiRequest]
      expect((crossing.body.tools as unknown[]).at(-1)).toEqual(RESPONSES_RECALL_TOOL_DEFINITION)
      expect(continued.body.tools).toEqual(crossing.body.tools)
      const added = inputOf(continued).slice(inputOf(crossing).length)
      expect(inputOf(continued).slice(0, inputOf(crossing).length)).toEqual(inputOf(crossing))
      // the round's items as they came (reasoning with its encrypted content), then the output
      expect(added).toEqual([
        { type: 'reasoning', id: 'rs_recall', summary: [], encrypted_content: 'gAAAAB-recall' },
        {
          type: 'function_call',
          id: 'fc_recall',
          status: 'completed',
          call_id: 'call_recall_1',
          name: PROXY_RECALL_TOOL,
          arguments: JSON.stringify({ query: 'rollout codename' })
        },
        { type: 'function_call_output', call_id: 'call_recall_1', output: expect.stringContaining(CODENAME_LINE) }
      ])
      // the next request, as Codex sends its history back (no ids): the upstream sees its own rounds where the answer stands
      input.push(
        ...output.map((o) => {
          const { id: _id, ...rest } = o as unknown as Item
          return rest
        }),
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Thanks. Now tag the release.' }] }
      )
      fake.fallback = { output: [message('Tagged.')] }
      await sdk.responses.create(body, { headers: SESSION })
      expect(fake.refused).toEqual([])
      const next = inputOf(fake.requests.at(-1)!)
      const at = next.findIndex((i) => i.encrypted_content === 'gAAAAB-recall')
      expect(at).toBeGreaterThan(0)
      expect(next.slice(at, at + 3)).toEqual(added)
      expect(next[at + 3]).toMatchObject({ type: 'message', role: 'assistant', content: [{ text: 'The codename is bluefin-7.' }] })
      expect(fake.requests.at(-1)!.body.tools).toEqual(crossing.body.tools)
    })
  }

  it('gives the client its own call when the model calls the recall beside it, and answers both on the next request', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => model(r, true)
    const input = history()
    const body = { model: 'gpt-test', store: false, input, tools, stream: true } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming
    const final = await sdk.responses.stream(body, { headers: SESSION }).finalResponse()
    expect(final.output.map((o) => (o.type === 'function_call' ? o.name : o.type))).toEqual(['reasoning', 'shell'])
    input.push(
      ...final.output.map((o) => {
        const { id: _id, ...rest } = o as unknown as Item
        return rest
      }),
      { type: 'function_call_output', call_id: 'call_client_ls', output: 'a.ts' }
    )
    fake.fallback = { output: [message('Listed.')] }
    await sdk.responses.create({ ...body, stream: false } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming, { headers: SESSION })
    expect(fake.refused).toEqual([])
    const tail = inputOf(fake.requests.at(-1)!).slice(-5)
    expect(tail.map((i) => (i.type === 'function_call' ? i.name : i.type))).toEqual([
      'reasoning',
      'shell',
      PROXY_RECALL_TOOL,
      'function_call_output',
      'function_call_output'
    ])
    expect(tail.slice(3).map((i) => i.call_id)).toEqual(['call_recall_1', 'call_client_ls'])
    expect(String(tail[3]?.output)).toContain(CODENAME_LINE)
  })

  it('ends the turn as a normal answer where the continuation is refused, the client told the search was not completed', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => (recallOutput(r) !== undefined ? { status: 500 } : model(r))
    const body = { model: 'gpt-test', store: false, input: history(), tools, stream: true } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming
    const final = await sdk.responses.stream(body, { headers: SESSION }).finalResponse()
    expect(final.status).toBe('completed')
    expect(JSON.stringify(final.output)).toContain('could not be completed')
    expect(JSON.stringify(final.output)).not.toContain(PROXY_RECALL_TOOL)
  })
})

describe('a Responses round', () => {
  const event = (data: Item): string => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`

  it('hides every event of a recall call, renumbers the other items from where the client is, numbers the events in one sequence, and holds the close', () => {
    const recall = { type: 'function_call', id: 'fc_r', call_id: 'c_r', name: PROXY_RECALL_TOOL, arguments: '{"query":"x"}' }
    const shell = { type: 'function_call', id: 'fc_s', call_id: 'c_s', name: 'shell', arguments: '{}' }
    const upstream = [
      event({ type: 'response.created', sequence_number: 0, response: { id: 'resp_2', output: [] } }),
      event({ type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: { ...recall, arguments: '' } }),
      event({ type: 'response.function_call_arguments.delta', sequence_number: 2, output_index: 0, item_id: 'fc_r', delta: '{"query":"x"}' }),
      event({ type: 'response.output_item.done', sequence_number: 3, output_index: 0, item: recall }),
      event({ type: 'response.output_item.added', sequence_number: 4, output_index: 1, item: shell }),
      event({ type: 'response.output_item.done', sequence_number: 5, output_index: 1, item: shell }),
      event({
        type: 'response.completed',
        sequence_number: 6,
        response: { id: 'resp_2', output: [recall, shell], usage: { input_tokens: 10, output_tokens: 5 } }
      })
    ].join('')
    // a second round: the client has had two items and seven events
    const cursor = { items: 2, sequence: 7, response: { id: 'resp_1' } }
    const round = new ResponsesRound(false, cursor)
    const out = parseResponsesEvents(upstream).flatMap((e) => round.take(e))
    const data = out.map((t) => parseResponsesEvents(t)[0]!.data!)
    expect(JSON.stringify(data)).not.toContain(PROXY_RECALL_TOOL)
    expect(data.map((d) => d.type)).toEqual(['response.output_item.added', 'response.output_item.done'])
    expect(data.map((d) => d.output_index)).toEqual([2, 2])
    expect(data.map((d) => d.sequence_number)).toEqual([7, 8])
    expect(round.items()).toEqual([recall, shell])
    const close = parseResponsesEvents(round.closing(round.usage(), [shell]))[0]!.data!
    expect(close).toMatchObject({
      type: 'response.completed',
      sequence_number: 9,
      response: { id: 'resp_1', output: [shell], usage: { input_tokens: 10, output_tokens: 5 } }
    })
  })

  it('puts an exchange back at its place: the run of items the client sent for its answer, whether or not it kept reasoning and ids', () => {
    const visible = [
      { type: 'reasoning', encrypted_content: 'e1' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Done.' }] }
    ]
    const exchange: ResponsesExchange = {
      at: 1,
      visible: responsesFingerprint(visible),
      rounds: [
        [
          { type: 'reasoning', id: 'rs_1', encrypted_content: 'e1' },
          { type: 'function_call', id: 'fc_r', call_id: 'c_r', name: PROXY_RECALL_TOOL, arguments: '{}' }
        ],
        { type: 'function_call_output', call_id: 'c_r', output: 'found' },
        [{ type: 'message', id: 'msg_1', role: 'assistant', content: [{ type: 'output_text', text: 'Done.' }] }]
      ],
      pending: []
    }
    const user = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go' }] }
    const next = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'next' }] }
    const restored = restoreResponses([user, ...visible, next], [exchange])
    expect(restored.items).toEqual([user, ...(exchange.rounds.flat() as Item[]), next])
    // a client that left the reasoning out is recognized all the same; the same answer elsewhere is another
    expect(restoreResponses([user, visible[1]!, next], [exchange]).restored).toBe(1)
    expect(restoreResponses([user, user, ...visible], [exchange]).restored).toBe(0)
  })
})

describe("the proxy's recall tool (Responses API): budget, names, prefixes", () => {
  let calls = 0
  const recallItem = (query = 'rollout codename'): Item => ({
    type: 'function_call',
    id: `fc_recall_${++calls}`,
    status: 'completed',
    call_id: `call_recall_${calls}`,
    name: PROXY_RECALL_TOOL,
    arguments: JSON.stringify({ query })
  })
  const outputsOf = (r: OpenAiRequest): string[] =>
    inputOf(r).flatMap((i) => (i.type === 'function_call_output' && String(i.call_id).startsWith('call_recall') ? [String(i.output)] : []))
  const body = (input: Item[], stream = false, own: unknown[] = tools): OpenAI.Responses.ResponseCreateParamsNonStreaming =>
    ({
      model: 'gpt-test',
      store: false,
      input,
      tools: own,
      ...(stream ? { stream: true } : {})
    }) as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming

  it('answers three rounds, says the budget is spent at a fourth call, and ends the turn as a normal answer if the model calls again', async () => {
    const { fake, sdk } = await gateway()
    fake.fallback = (r) => (offered(r) ? { output: [recallItem(`query ${calls}`)] } : { output: [message('ok')] })
    const answer = await sdk.responses.create(body(history()), { headers: SESSION })
    expect(fake.refused).toEqual([])
    const turn = fake.requests.filter(offered)
    expect(turn).toHaveLength(5)
    const results = turn.slice(1).map((r) => outputsOf(r).at(-1) ?? '')
    expect(results.slice(0, 2).every((t) => !t.includes('last'))).toBe(true)
    expect(results[2]).toContain(`last ${PROXY_RECALL_TOOL} this turn`)
    expect(results[3]).toContain('budget of 3')
    expect(answer.status).toBe('completed')
    expect(JSON.stringify(answer.output)).not.toContain(PROXY_RECALL_TOOL)
    expect(JSON.stringify(answer.output)).toContain('could not be completed')
  })

  it('is never offered where the client declares a tool of that name (in `tools` or in an `additional_tools` item), and nothing names it then', async () => {
    const own = { type: 'function', name: PROXY_RECALL_TOOL, description: 'the client’s own', parameters: { type: 'object', properties: {} } }
    for (const input of [
      history(),
      [{ type: 'additional_tools', role: 'developer', tools: [{ type: 'namespace', name: 'mine', tools: [own] }] }, ...history()]
    ]) {
      const { fake, sdk } = await gateway()
      fake.fallback = { output: [message('ok')] }
      const declared = input[0]?.type === 'additional_tools' ? tools : [...tools, own]
      const { response } = await sdk.responses.create(body(input, false, declared), { headers: SESSION }).withResponse()
      expect(response.headers.get('x-compaction')).toBe('compacted')
      expect(response.headers.get('x-compaction-recall-tool')).toBeNull()
      expect(fake.requests.at(-1)!.body.tools).toEqual(declared)
    }
  })

  it('sends the upstream, turn after turn, its own last request and answer as the next prefix, whatever the model calls (property)', async () => {
    const turn = fc.constantFrom('text', 'recall', 'beside', 'twice')
    let compared = 0
    await fc.assert(
      fc.asyncProperty(fc.array(turn, { minLength: 2, maxLength: 5 }), fc.boolean(), async (turns, stream) => {
        const { fake, sdk } = await gateway()
        let kind = 'text'
        let rounds = 0
        const answers = new Map<OpenAiRequest, Item[]>()
        fake.fallback = (r) => {
          const done = outputsOf(r).length > 0 && inputOf(r).at(-1)?.type === 'function_call_output' && rounds >= (kind === 'twice' ? 2 : 1)
          let output: Item[]
          if (!offered(r) || kind === 'text' || done) output = [message(`Turn done after ${rounds} rounds.`, `msg_${++calls}`)]
          else {
            rounds++
            output = [
              { type: 'reasoning', id: `rs_${++calls}`, summary: [], encrypted_content: `gAAAAB-${calls}` },
              ...(kind === 'beside'
                ? [{ type: 'function_call', id: `fc_c${calls}`, status: 'completed', call_id: `call_client_${calls}`, name: 'shell', arguments: '{}' }]
                : []),
              recallItem()
            ]
          }
          answers.set(r, output)
          return { output }
        }
        const input = history()
        let last: { input: Item[]; answer: Item[] } | undefined
        for (const next of turns) {
          kind = next
          rounds = 0
          const before = fake.requests.length
          const answer = stream
            ? await sdk.responses
                .stream({ ...body(input), stream: true } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming, { headers: SESSION })
                .finalResponse()
            : await sdk.responses.create(body(input), { headers: SESSION })
          expect(fake.refused).toEqual([])
          const sent = fake.requests.slice(before)
          const first = inputOf(sent[0]!)
          // (unless a crossing rewrote the prefix)
          if (last && JSON.stringify(first.slice(0, 3)) === JSON.stringify(last.input.slice(0, 3))) {
            expect(first.slice(0, last.input.length + last.answer.length)).toEqual([...last.input, ...last.answer])
            compared++
          }
          const final = sent.at(-1)!
          last = { input: inputOf(final), answer: answers.get(final)! }
          expect(JSON.stringify(answer.output)).not.toContain(PROXY_RECALL_TOOL)
          // (as a client sends its history back: the SDK's own `parsed` field is not the API's)
          input.push(...(JSON.parse(JSON.stringify(answer.output, (k, v: unknown) => (k === 'parsed' ? undefined : v))) as Item[]))
          const client = answer.output.find((o) => o.type === 'function_call')
          input.push(
            client
              ? { type: 'function_call_output', call_id: (client as { call_id: string }).call_id, output: 'a.ts' }
              : { type: 'message', role: 'user', content: [{ type: 'input_text', text: `Go on (${input.length}).` }] }
          )
        }
        for (const o of opened.splice(0).reverse()) await o.close()
      }),
      { numRuns: 16 }
    )
    // (turns after a crossing compare against the turn before them: most do)
    expect(compared).toBeGreaterThan(4)
  }, 120_000)
})
