import type { AddressInfo } from 'node:net'
import { GoogleGenAI } from '@google/genai'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import {
  GEMINI_RECALL_TOOL_DEFINITION,
  type GeminiExchange,
  GeminiRound,
  geminiFingerprint,
  parseGeminiChunks,
  restoreGemini
} from '../../src/proxy/recall-gemini.js'
import { testApp } from '../helpers/app.js'
import { FakeGemini, type GeminiRequest, geminiRefusal } from '../helpers/fake-gemini.js'

/**
 * The proxy's recall tool on Gemini's API, through Google's own SDK against a fake that refuses what the API
 * refuses (a function response that answers no call, a call left unanswered, a call without its thought
 * signature): offered from the crossing on, answered by the gateway, the turn continued upstream with the
 * model's parts as they came, the client given one answer, the next request rebuilt.
 */
type Content = { role: string; parts: Record<string, unknown>[] }
type Part = Record<string, unknown>

const UPSTREAM_KEY = 'gemini-upstream-key-000000000000'
const GATEWAY_KEY = 'gw-gemini-key-0000000001'
const SESSION = { 'x-compaction-session': 'recall-gemini-session' }
const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(): Promise<{ fake: FakeGemini; ai: GoogleGenAI }> {
  const fake = await new FakeGemini().start()
  fake.key = UPSTREAM_KEY
  fake.requireSignatures = true
  opened.push(fake)
  const app = await testApp({
    GOOGLE_GEMINI_BASE_URL: fake.url,
    GEMINI_API_KEY: UPSTREAM_KEY,
    COMPACT_API_KEYS: `me=${GATEWAY_KEY}`,
    COMPACT_SUMMARIZER: 'extractive',
    COMPACT_PRECOMPUTE_AT: 'off',
    COMPACT_BUDGET: '8000'
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  return { fake, ai: new GoogleGenAI({ apiKey: GATEWAY_KEY, httpOptions: { baseUrl: url, headers: SESSION } }) }
}

/** A Gemini CLI-shaped session whose early log printed the line the task needs later. */
function history(): Content[] {
  const log = [...Array.from({ length: 200 }, (_, i) => `INFO worker ${i} ready`), CODENAME_LINE, 'INFO done'].join('\n')
  const contents: Content[] = [
    { role: 'user', parts: [{ text: 'Deploy the service and watch the log' }] },
    {
      role: 'model',
      parts: [{ functionCall: { id: 'call-log', name: 'run_shell_command', args: { command: 'cat deploy.log' } }, thoughtSignature: 'c2lnLWxvZw==' }]
    },
    { role: 'user', parts: [{ functionResponse: { id: 'call-log', name: 'run_shell_command', response: { output: log } } }] }
  ]
  for (let i = 0; i < 12; i++)
    contents.push(
      {
        role: 'model',
        parts: [{ functionCall: { id: `call-${i}`, name: 'read_file', args: { absolute_path: `/w/m${i}.ts` } }, thoughtSignature: `c2lnLSR7aX0=${i}` }]
      },
      { role: 'user', parts: [{ functionResponse: { id: `call-${i}`, name: 'read_file', response: { output: `module ${i}\n${'x'.repeat(4_000)}` } } }] }
    )
  contents.push(
    { role: 'model', parts: [{ text: 'Every module is done.' }] },
    { role: 'user', parts: [{ text: 'What is the rollout codename? Put it in the release notes.' }] }
  )
  return contents
}

const tools = [
  {
    functionDeclarations: [
      { name: 'run_shell_command', description: 'Runs a command', parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' } } } }
    ]
  }
]
const offered = (body: GeminiRequest['body']): boolean => JSON.stringify(body.tools ?? []).includes(`"${PROXY_RECALL_TOOL}"`)
const recallResponse = (body: GeminiRequest['body']): string | undefined => {
  const part = (body.contents ?? []).at(-1)?.parts.find((p) => (p.functionResponse as { name?: unknown } | undefined)?.name === PROXY_RECALL_TOOL)
  return part === undefined ? undefined : JSON.stringify((part.functionResponse as { response: unknown }).response)
}
const recallCall: Part = {
  functionCall: { id: 'recall-1', name: PROXY_RECALL_TOOL, args: { query: 'rollout codename' } },
  thoughtSignature: 'c2lnLXJlY2FsbA=='
}
const clientCall: Part = { functionCall: { id: 'client-ls', name: 'run_shell_command', args: { command: 'ls' } } }

/** The model: with the tool, asks for the codename (beside a call of the client's where told); given the result, answers with it. */
function model(beside = false): (body: GeminiRequest['body']) => Part[] {
  return (body) => {
    const found = recallResponse(body)
    if (found !== undefined) return [{ text: `The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.` }]
    if (offered(body) && JSON.stringify((body.contents ?? []).at(-1)).includes('rollout codename'))
      return [{ text: 'Looking it up.', thought: true }, recallCall, ...(beside ? [clientCall] : [])]
    return [{ text: 'ok' }]
  }
}

describe("the proxy's recall tool (Gemini's API)", () => {
  it('has a fake that refuses a call the next content leaves unanswered', () => {
    const contents = [
      { role: 'user', parts: [{ text: 'go' }] },
      { role: 'model', parts: [recallCall, { ...clientCall }] },
      { role: 'user', parts: [{ functionResponse: { id: 'client-ls', name: 'run_shell_command', response: { output: 'a' } } }] }
    ]
    expect(geminiRefusal({ contents }, true)).toMatch(/number of function response parts is equal/)
  })

  for (const stream of [false, true]) {
    it(`answers the model's call and continues the turn; the client gets one answer with the line used, and the next request the rounds (${stream ? 'streamed' : 'not streamed'})`, async () => {
      const { fake, ai } = await gateway()
      fake.script = model()
      const contents = history()
      const request = { model: 'gemini-test', contents, config: { tools } }
      let parts: Part[]
      if (stream) {
        parts = []
        let finish: unknown
        for await (const chunk of await ai.models.generateContentStream(request)) {
          parts.push(...((chunk.candidates?.[0]?.content?.parts ?? []) as Part[]))
          finish = chunk.candidates?.[0]?.finishReason ?? finish
        }
        expect(finish).toBe('STOP')
      } else {
        const answer = await ai.models.generateContent(request)
        parts = (answer.candidates?.[0]?.content?.parts ?? []) as Part[]
        expect(answer.candidates?.[0]?.finishReason).toBe('STOP')
        expect(answer.usageMetadata?.candidatesTokenCount).toBe(4)
      }
      expect(JSON.stringify(parts)).not.toContain(PROXY_RECALL_TOOL)
      const text = parts
        .filter((p) => p.thought !== true)
        .map((p) => p.text ?? '')
        .join('')
      expect(text).toBe('The codename is bluefin-7.')
      expect(fake.refused).toEqual([])
      const [crossing, continued] = fake.requests.slice(-2) as [GeminiRequest, GeminiRequest]
      expect((crossing.body.tools as unknown[]).at(-1)).toEqual(GEMINI_RECALL_TOOL_DEFINITION)
      expect(continued.body.tools).toEqual(crossing.body.tools)
      const sent = crossing.body.contents!.length
      expect(continued.body.contents!.slice(0, sent)).toEqual(crossing.body.contents)
      // the model's parts as they came (its thought, the call with its signature), then the response
      const added = continued.body.contents!.slice(sent)
      expect(added[0]).toEqual({ role: 'model', parts: [{ text: 'Looking it up.', thought: true }, recallCall] })
      expect(added[1]?.role).toBe('user')
      expect(JSON.stringify(added[1])).toContain(CODENAME_LINE)
      // the next request, as Gemini CLI sends its history back (thoughts left out, text parts merged)
      contents.push({ role: 'model', parts: [{ text }] }, { role: 'user', parts: [{ text: 'Thanks. Now tag the release.' }] })
      fake.script = () => [{ text: 'Tagged.' }]
      await ai.models.generateContent(request)
      expect(fake.refused).toEqual([])
      const next = fake.requests.at(-1)!.body.contents!
      const at = next.findIndex((c) => JSON.stringify(c) === JSON.stringify(added[0]))
      expect(at).toBeGreaterThan(0)
      expect(next.slice(at, at + 2)).toEqual(added)
      expect(next[at + 2]?.role).toBe('model')
      expect(JSON.stringify(next[at + 2])).toContain('bluefin-7')
    })
  }

  it("gives the client its own call when the model calls the recall beside it, and answers both in the next request's content", async () => {
    const { fake, ai } = await gateway()
    fake.script = model(true)
    const contents = history()
    const request = { model: 'gemini-test', contents, config: { tools } }
    const parts: Part[] = []
    for await (const chunk of await ai.models.generateContentStream(request)) parts.push(...((chunk.candidates?.[0]?.content?.parts ?? []) as Part[]))
    expect(parts.filter((p) => p.functionCall).map((p) => (p.functionCall as { name: string }).name)).toEqual(['run_shell_command'])
    contents.push(
      { role: 'model', parts: parts.filter((p) => p.thought !== true) },
      { role: 'user', parts: [{ functionResponse: { id: 'client-ls', name: 'run_shell_command', response: { output: 'a.ts' } } }] }
    )
    fake.script = () => [{ text: 'Listed.' }]
    await ai.models.generateContent(request)
    expect(fake.refused).toEqual([])
    const tail = fake.requests.at(-1)!.body.contents!.slice(-2)
    expect(tail[0]?.parts).toEqual([{ text: 'Looking it up.', thought: true }, recallCall, clientCall])
    expect(tail[1]?.parts.map((p) => (p.functionResponse as { id: string }).id)).toEqual(['recall-1', 'client-ls'])
    expect(JSON.stringify(tail[1]?.parts[0])).toContain(CODENAME_LINE)
  })
})

describe('a Gemini round', () => {
  it('takes the recall calls out of the chunks as they come, holds the finish, and keeps every part with its signature', () => {
    const chunk = (parts: Part[], finish?: string): string =>
      `data: ${JSON.stringify({ candidates: [{ content: { role: 'model', parts }, ...(finish ? { finishReason: finish } : {}), index: 0 }], usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 3 } })}\r\n\r\n`
    const round = new GeminiRound()
    const out = parseGeminiChunks(chunk([{ text: 'Looking' }]) + chunk([recallCall]) + chunk([clientCall, { text: '' }], 'STOP')).flatMap((c) => round.take(c))
    expect(out.join('')).not.toContain(PROXY_RECALL_TOOL)
    expect(out).toHaveLength(2)
    expect(out.join('')).not.toContain('finishReason')
    expect(round.complete).toBe(true)
    expect(round.message()).toEqual({ role: 'model', parts: [{ text: 'Looking' }, recallCall, clientCall, { text: '' }] })
    const close = parseGeminiChunks(round.closing({ input_tokens: 18, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 6 }))[0]!.data!
    expect(close).toMatchObject({
      candidates: [{ finishReason: 'STOP' }],
      usageMetadata: { promptTokenCount: 18, candidatesTokenCount: 6, totalTokenCount: 24 }
    })
  })

  it('puts an exchange back at its place, the pending responses opening the content that answers the turn', () => {
    const visible: Content = { role: 'model', parts: [clientCall] }
    const exchange: GeminiExchange = {
      at: 1,
      visible: geminiFingerprint(visible),
      rounds: [{ role: 'model', parts: [recallCall, clientCall] }],
      pending: [{ functionResponse: { id: 'recall-1', name: PROXY_RECALL_TOOL, response: { output: 'found' } } }]
    }
    const answer = { role: 'user', parts: [{ functionResponse: { id: 'client-ls', name: 'run_shell_command', response: { output: 'a' } } }] }
    const user = { role: 'user', parts: [{ text: 'go' }] }
    const restored = restoreGemini([user, visible, answer], [exchange])
    expect(restored.items).toEqual([user, exchange.rounds[0], { ...answer, parts: [...exchange.pending, ...answer.parts] }])
    expect(geminiRefusal({ contents: restored.items }, true)).toBeUndefined()
    expect(restoreGemini([user, user, visible], [exchange]).restored).toBe(0)
  })
})

describe("the proxy's recall tool (Gemini's API): budget, names, prefixes", () => {
  let calls = 0
  const call = (query = 'rollout codename'): Part => ({
    functionCall: { id: `recall-${++calls}`, name: PROXY_RECALL_TOOL, args: { query } },
    thoughtSignature: Buffer.from(`sig ${calls}`).toString('base64')
  })
  const responsesOf = (body: GeminiRequest['body']): string[] =>
    (body.contents ?? []).flatMap((c) =>
      c.parts.flatMap((p) => ((p.functionResponse as { name?: unknown } | undefined)?.name === PROXY_RECALL_TOOL ? [JSON.stringify(p.functionResponse)] : []))
    )

  it('answers three rounds, says the budget is spent at a fourth call, and ends the turn as a normal answer if the model calls again', async () => {
    const { fake, ai } = await gateway()
    fake.script = (body) => (offered(body) ? [call(`query ${calls}`)] : [{ text: 'ok' }])
    const answer = await ai.models.generateContent({ model: 'gemini-test', contents: history(), config: { tools } })
    expect(fake.refused).toEqual([])
    const turn = fake.requests.filter((r) => offered(r.body))
    expect(turn).toHaveLength(5)
    const results = turn.slice(1).map((r) => responsesOf(r.body).at(-1) ?? '')
    expect(results.slice(0, 2).every((t) => !t.includes('last'))).toBe(true)
    expect(results[2]).toContain(`last ${PROXY_RECALL_TOOL} this turn`)
    expect(results[3]).toContain('budget of 3')
    expect(answer.candidates?.[0]?.finishReason).toBe('STOP')
    expect(JSON.stringify(answer.candidates)).not.toContain(PROXY_RECALL_TOOL)
    expect(answer.text).toContain('could not be completed')
  })

  it('is never offered where the client declares a function of that name, and nothing names it then', async () => {
    const { fake, ai } = await gateway()
    const own = [{ functionDeclarations: [...tools[0]!.functionDeclarations, { name: PROXY_RECALL_TOOL, description: 'the client’s own' }] }]
    const answer = await ai.models.generateContent({ model: 'gemini-test', contents: history(), config: { tools: own } })
    expect(answer.sdkHttpResponse?.headers?.['x-compaction']).toBe('compacted')
    expect(answer.sdkHttpResponse?.headers?.['x-compaction-recall-tool']).toBeUndefined()
    expect(fake.requests.at(-1)!.body.tools).toEqual(own)
  })

  it('sends the upstream, turn after turn, its own last request and answer as the next prefix, whatever the model calls (property)', async () => {
    const turn = fc.constantFrom('text', 'recall', 'beside', 'twice')
    let compared = 0
    await fc.assert(
      fc.asyncProperty(fc.array(turn, { minLength: 2, maxLength: 5 }), fc.boolean(), async (turns, stream) => {
        const { fake, ai } = await gateway()
        let kind = 'text'
        let rounds = 0
        const answers = new Map<string, Part[]>()
        fake.script = (body) => {
          const last = (body.contents ?? []).at(-1)
          const answered = last?.parts.some((p) => (p.functionResponse as { name?: unknown } | undefined)?.name === PROXY_RECALL_TOOL) === true
          let parts: Part[]
          if (!offered(body) || kind === 'text' || (answered && rounds >= (kind === 'twice' ? 2 : 1))) parts = [{ text: `Turn done after ${rounds} rounds.` }]
          else {
            rounds++
            parts = [call(), ...(kind === 'beside' ? [{ functionCall: { id: `client-${calls}`, name: 'run_shell_command', args: { command: 'ls' } } }] : [])]
          }
          answers.set(JSON.stringify(body.contents), parts)
          return parts
        }
        const contents = history()
        let last: { contents: unknown[]; answer: unknown } | undefined
        for (const next of turns) {
          kind = next
          rounds = 0
          const before = fake.requests.length
          const request = { model: 'gemini-test', contents, config: { tools } }
          const parts: Part[] = []
          if (stream)
            for await (const chunk of await ai.models.generateContentStream(request)) parts.push(...((chunk.candidates?.[0]?.content?.parts ?? []) as Part[]))
          else parts.push(...(((await ai.models.generateContent(request)).candidates?.[0]?.content?.parts ?? []) as Part[]))
          expect(fake.refused).toEqual([])
          const sent = fake.requests.slice(before)
          const first = sent[0]!.body.contents!
          if (last && JSON.stringify(first[0]) === JSON.stringify(last.contents[0])) {
            expect(first.slice(0, last.contents.length + 1)).toEqual([...last.contents, last.answer])
            compared++
          }
          const final = sent.at(-1)!.body.contents!
          last = { contents: final, answer: { role: 'model', parts: answers.get(JSON.stringify(final)) } }
          expect(JSON.stringify(parts)).not.toContain(PROXY_RECALL_TOOL)
          // the client keeps what it read, text parts merged (as Gemini CLI does)
          const text = parts.map((p) => (typeof p.text === 'string' ? p.text : '')).join('')
          const clientCalls = parts.filter((p) => p.functionCall)
          contents.push({ role: 'model', parts: [...(text !== '' ? [{ text }] : []), ...clientCalls] })
          contents.push(
            clientCalls.length > 0
              ? {
                  role: 'user',
                  parts: clientCalls.map((p) => ({ functionResponse: { ...(p.functionCall as object), args: undefined, response: { output: 'a.ts' } } }))
                }
              : { role: 'user', parts: [{ text: `Go on (${contents.length}).` }] }
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
