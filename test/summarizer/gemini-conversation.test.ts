import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { CORE_REDACTORS } from '../../src/compaction/index.js'
import { SummarizerFault } from '../../src/summarizer/faults.js'
import { GeminiConversationSummarizer } from '../../src/summarizer/gemini-conversation.js'
import { FakeGemini } from '../helpers/fake-gemini.js'
import { planOfItems } from '../helpers/conversation-plan.js'

const KEY = 'gemini-conversation-key-0000000000'
const answer = JSON.stringify({ objective: 'Port the exporter to the new API', next_steps: ['Go on with the next file'] })

/** A Gemini body as Gemini CLI sends it: a system instruction, tools, steps of a read_file call (each answered in the next content). */
function geminiBody(steps: number): Record<string, unknown> {
  const contents: Record<string, unknown>[] = [{ role: 'user', parts: [{ text: 'Port the exporter to the new API' }] }]
  for (let i = 0; i < steps; i++)
    contents.push(
      { role: 'model', parts: [{ functionCall: { id: `c${i}`, name: 'read_file', args: { absolute_path: `/w/e${i}.ts` } }, thoughtSignature: `c2ln${i}` }] },
      { role: 'user', parts: [{ functionResponse: { id: `c${i}`, name: 'read_file', response: { output: `e${i} ${'o'.repeat(1_500)}` } } }] },
      { role: 'model', parts: [{ text: `Read e${i}.` }] },
      { role: 'user', parts: [{ text: `Go on with e${i + 1}` }] }
    )
  return {
    systemInstruction: { parts: [{ text: 'You are Gemini CLI. '.repeat(300) }] },
    tools: [{ functionDeclarations: [{ name: 'read_file', parametersJsonSchema: { type: 'object', properties: { absolute_path: { type: 'string' } } } }] }],
    generationConfig: { temperature: 0 },
    contents
  }
}

let fake: FakeGemini
beforeAll(async () => {
  fake = await new FakeGemini().start()
  fake.key = KEY
  fake.requireSignatures = true
})
afterAll(async () => fake.close())
beforeEach(() => {
  fake.requests.length = 0
  fake.conversationSummaries = [answer]
})

function summarizerFor(steps: number, timeoutMs = 5_000) {
  const body = geminiBody(steps)
  const { plan, starts } = planOfItems(body.contents as Record<string, unknown>[], 'gemini')
  const summarizer = new GeminiConversationSummarizer(
    {
      forwarded: () => ({ body, starts }),
      url: `${fake.url}/v1beta/models/gemini-test:generateContent`,
      headers: { 'x-goog-api-key': KEY, 'content-length': '1' },
      timeoutMs
    },
    'gemini-test'
  )
  return { body, plan, starts, summarizer, request: () => ({ plan, redactors: CORE_REDACTORS }) }
}

describe("a Gemini summary written by the conversation's own model in the conversation", () => {
  it('sends the body as it was forwarded with the doctrine as one more user content, counts the kept part in its contents, and reads the answer', async () => {
    const { body, plan, starts, summarizer, request } = summarizerFor(10)
    fake.conversationSummaries = [`Here it is:\n\`\`\`json\n${answer}\n\`\`\``]
    const result = await summarizer.summarize(request())
    expect(result.sections?.objective).toBe('Port the exporter to the new API')
    expect(result.report).toMatchObject({ kind: 'gemini', model: 'gemini-test', calls: 1, fallback_reason: null })
    const [call] = fake.requests
    const sent = body.contents as unknown[]
    expect(call!.body.contents!.slice(0, sent.length)).toEqual(sent)
    expect(call!.body.systemInstruction).toEqual(body.systemInstruction)
    expect(call!.body.tools).toEqual(body.tools)
    // the client's own setting kept, room for the answer added
    expect(call!.body.generationConfig).toMatchObject({ temperature: 0, maxOutputTokens: expect.any(Number) })
    const instruction = JSON.stringify(call!.body.contents!.at(-1))
    const counted = Number(/its last (\d+) message/.exec(instruction)?.[1])
    expect(plan.cut.tail.length).toBeGreaterThan(0)
    expect(sent.length - counted).toBe(starts[plan.cut.cut])
    expect(call!.headers['x-goog-api-key']).toBe(KEY)
    expect(fake.refused).toEqual([])
  })

  it('asks once more in the same conversation where the answer is no JSON object, then gives up with the reason', async () => {
    fake.conversationSummaries = ['I would rather keep working.', 'Still not.']
    const { summarizer, request } = summarizerFor(10)
    const err = await summarizer.summarize(request()).catch((e: unknown) => e)
    expect((err as SummarizerFault).reason).toBe('invalid_output')
    expect(fake.requests).toHaveLength(2)
    const [first, second] = fake.requests
    expect(second!.body.contents!.slice(0, first!.body.contents!.length)).toEqual(first!.body.contents)
    expect(JSON.stringify(second!.body.contents!.at(-1))).toContain('Answer with the JSON object only')
    expect(fake.refused).toEqual([])
  })

  it("names the API's refusals and failures as the other summarizers do, and says where the request was never forwarded", async () => {
    for (const [status, reason] of [
      [429, 'rate_limited'],
      [403, 'auth_error'],
      [500, 'server_error'],
      [400, 'bad_request']
    ] as const) {
      fake.conversationSummaries = [{ status }]
      const err = await summarizerFor(10)
        .summarizer.summarize(summarizerFor(10).request())
        .catch((e: unknown) => e)
      expect((err as SummarizerFault).reason, String(status)).toBe(reason)
    }
    const { plan } = summarizerFor(10)
    const never = new GeminiConversationSummarizer({ forwarded: () => undefined, url: fake.url, headers: {}, timeoutMs: 1_000 }, 'gemini-test')
    await expect(never.summarize({ plan, redactors: CORE_REDACTORS })).rejects.toThrow(/never forwarded/)
  })

  it('gives up on a model that never answers when its time is out', async () => {
    const { createServer } = await import('node:http')
    const silent = createServer(() => undefined)
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    try {
      const { plan } = summarizerFor(10)
      const port = (silent.address() as { port: number }).port
      const summarizer = new GeminiConversationSummarizer(
        {
          forwarded: () => ({ body: geminiBody(10), starts: [] }),
          url: `http://127.0.0.1:${port}/v1beta/models/m:generateContent`,
          headers: {},
          timeoutMs: 300
        },
        'm'
      )
      const err = await summarizer.summarize({ plan, redactors: CORE_REDACTORS }).catch((e: unknown) => e)
      expect((err as SummarizerFault).reason).toBe('timeout')
    } finally {
      silent.closeAllConnections()
      silent.close()
    }
  })
})
