import { GoogleGenAI } from '@google/genai'
import { afterEach, describe, expect, it } from 'vitest'
import { planCompaction } from '../../src/compaction/index.js'
import { compactionRedactors } from '../../src/secrets/index.js'
import { GeminiSummarizer } from '../../src/summarizer/gemini.js'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import { testApp } from '../helpers/app.js'
import { FakeGemini } from '../helpers/fake-gemini.js'
import { assistant, shellStep, user } from '../helpers/history.js'

/** The Gemini summarizer through Google's own SDK against a fake of Gemini's API. */
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

const history = [
  user('Fix the parser'),
  ...shellStep('t1', 'npm test', 'FAIL src/parser.test.ts\nError: expected 1 to be 2'),
  assistant('The parser drops the last token.'),
  user('Fix it')
]

async function summarizer(attempts = 1): Promise<{ fake: FakeGemini; gemini: GeminiSummarizer }> {
  const fake = await new FakeGemini().start()
  fake.key = 'gemini-key-summarizer-0000000'
  opened.push(fake)
  const client = new GoogleGenAI({ apiKey: fake.key, httpOptions: { baseUrl: fake.url, retryOptions: { attempts } } })
  return { fake, gemini: new GeminiSummarizer({ client, model: 'gemini-test', inputBudgetTokens: 100_000 }) }
}

function request() {
  const redactors = compactionRedactors()
  const plan = planCompaction({ messages: history, mode: 'manual', budgetTokens: 'off', sizingBudgetTokens: 45_000, keepTurns: 1, dryRun: false }, redactors)
  return { plan, redactors, keyName: '' }
}

describe('the Gemini summarizer (COMPACT_SUMMARIZER=gemini)', () => {
  it('forces the summary function under the doctrine and reads its arguments; counts what the call took', async () => {
    const { fake, gemini } = await summarizer()
    fake.summaries = [{ args: { objective: 'Fix the parser (by Gemini)', failing_tests_and_errors: ['src/parser.test.ts fails: expected 1 to be 2'] } }]
    const result = await gemini.summarize(request())
    expect(result.sections?.objective).toBe('Fix the parser (by Gemini)')
    expect(result.report).toMatchObject({ kind: 'gemini', model: 'gemini-test', calls: 1, fallback_reason: null })
    expect(result.report.output_tokens).toBe(40)
    const sent = fake.requests[0]!
    expect(sent.path).toBe('/v1beta/models/gemini-test:generateContent')
    expect(JSON.stringify(sent.body.systemInstruction)).toContain(JSON.stringify(DOCTRINE_TEXT.slice(0, 80)).slice(1, -1))
    expect(sent.body.toolConfig).toEqual({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['record_summary'] } })
  })

  it('asks again once when the answer is no valid call, with the model content sent back as it came; then names the fault', async () => {
    const { fake, gemini } = await summarizer()
    fake.summaries = [{ text: 'Here is a summary in prose.' }, { args: { objective: 'second try' } }]
    const result = await gemini.summarize(request())
    expect(result.sections?.objective).toBe('second try')
    expect(result.report.calls).toBe(2)
    const retry = fake.requests[1]!.body.contents!
    expect(retry.at(-2)).toEqual({ role: 'model', parts: [{ text: 'Here is a summary in prose.' }] })
    expect(JSON.stringify(retry.at(-1))).toContain('did not call record_summary')

    fake.summaries = [{ text: 'prose again' }]
    await expect(gemini.summarize(request())).rejects.toMatchObject({ reason: 'no_tool_call' })
    fake.summaries = [{ args: { objective: 42 } }]
    await expect(gemini.summarize(request())).rejects.toMatchObject({ reason: 'invalid_output' })
    for (const [status, reason] of [
      [429, 'rate_limited'],
      [400, 'bad_request'],
      [500, 'server_error'],
      [503, 'overloaded']
    ] as const) {
      fake.summaries = [{ status }]
      await expect(gemini.summarize(request())).rejects.toMatchObject({ reason })
    }
  })

  it("writes the gateway's summaries where configured, and falls back to the extractive one when Gemini fails", async () => {
    const fake = await new FakeGemini().start()
    fake.key = 'gemini-key-app-000000000000'
    opened.push(fake)
    const app = await testApp({ COMPACT_SUMMARIZER: 'gemini', GEMINI_API_KEY: fake.key, GOOGLE_GEMINI_BASE_URL: fake.url, COMPACT_MODEL: 'gemini-test' })
    opened.push(app)
    fake.summaries = [{ args: { objective: 'Fix the parser (by Gemini)' } }]
    const ok = (await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: history, mode: 'manual' } })).json()
    expect(ok.summarizer).toMatchObject({ kind: 'gemini', model: 'gemini-test', fallback_reason: null })
    expect(ok.summary.sections.objective).toBe('Fix the parser (by Gemini)')
    fake.summaries = [{ status: 400 }]
    const fallback = (
      await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: [...history, assistant('Fixed.'), user('and the docs')], mode: 'manual' } })
    ).json()
    expect(fallback.summarizer, JSON.stringify(fallback).slice(0, 300)).toMatchObject({ kind: 'extractive', fallback_reason: 'bad_request' })
    const metrics = await app.metrics.registry.getSingleMetricAsString('compaction_summarizer_calls_total')
    expect(metrics).toContain('kind="gemini",result="bad_request"} 1')
  })
})
