import type { AddressInfo } from 'node:net'
import { GoogleGenAI } from '@google/genai'
import { afterEach, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import { testApp } from '../helpers/app.js'
import { FakeGemini, type GeminiRequest } from '../helpers/fake-gemini.js'

type Content = { role: string; parts: Record<string, unknown>[] }

const UPSTREAM_KEY = 'gemini-upstream-key-summaries-0000'
const BUDGET = 12_000
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

const isSummaryCall = (r: GeminiRequest): boolean => JSON.stringify(r.body.contents?.at(-1) ?? null).includes('<compaction-request>')

/** A Gemini CLI session of `steps` tool steps (about 1,000 tokens each), each model content's call with its thought signature. */
function session(steps: number): Content[] {
  const contents: Content[] = [{ role: 'user', parts: [{ text: 'Port the exporter to the new API' }] }]
  for (let i = 0; i < steps; i++) {
    contents.push({
      role: 'model',
      parts: [{ functionCall: { id: `call-${i}`, name: 'read_file', args: { absolute_path: `/w/src/e${i}.ts` } }, thoughtSignature: `c2ln${i}` }]
    })
    contents.push({ role: 'user', parts: [{ functionResponse: { id: `call-${i}`, name: 'read_file', response: { output: `e${i} ${'o'.repeat(4_000)}` } } }] })
  }
  contents.push({ role: 'model', parts: [{ text: 'Read them.' }] }, { role: 'user', parts: [{ text: 'Go on' }] })
  return contents
}

async function gateway(env: Record<string, string>): Promise<{ app: App; fake: FakeGemini; ai: GoogleGenAI }> {
  const fake = await new FakeGemini().start()
  fake.key = UPSTREAM_KEY
  fake.requireSignatures = true
  fake.implicitCacheMin = 2_048
  opened.push(fake)
  const app = await testApp({ GOOGLE_GEMINI_BASE_URL: fake.url, GEMINI_API_KEY: UPSTREAM_KEY, COMPACT_PRECOMPUTE_AT: '0.5', ...env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const ai = new GoogleGenAI({ apiKey: 'any-client-key', httpOptions: { baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` } })
  return { app, fake, ai }
}

/** Sends the session turn by turn (each turn's background work settled first) until a request is compacted. */
async function untilCrossing(app: App, ai: GoogleGenAI, id: string): Promise<void> {
  for (let steps = 1; steps < 60; steps++) {
    const answer = await ai.models.generateContent({
      model: 'gemini-test',
      contents: session(steps),
      config: {
        systemInstruction: 'You are a coding agent. '.repeat(200),
        httpOptions: { headers: { 'x-compaction-budget': String(BUDGET), 'x-session-id': id } }
      }
    })
    await app.proxy.compactor.idle()
    if (answer.sdkHttpResponse?.headers?.['x-compaction'] === 'compacted') return
  }
  throw new Error('never crossed')
}

describe("Gemini's implicit cache, as the fake keeps it", () => {
  it('reads a repeated prefix of the same model and key over the least count, and nothing of a changed one or a short one', async () => {
    const fake = await new FakeGemini().start()
    opened.push(fake)
    fake.implicitCacheMin = 2_048
    const send = async (body: unknown, key = 'k1'): Promise<Record<string, number>> =>
      (
        (await (
          await fetch(`${fake.url}/v1beta/models/gemini-test:generateContent`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
            body: JSON.stringify(body)
          })
        ).json()) as { usageMetadata: Record<string, number> }
      ).usageMetadata
    const long = { systemInstruction: { parts: [{ text: 'x'.repeat(12_000) }] }, contents: session(3) }
    expect((await send(long)).cachedContentTokenCount).toBeUndefined()
    // the same prefix and one content more: the prefix is read
    const again = await send({
      ...long,
      contents: [...session(3), { role: 'model', parts: [{ text: 'more' }] }, { role: 'user', parts: [{ text: 'and more' }] }]
    })
    expect(again.cachedContentTokenCount).toBeGreaterThan(0.9 * again.promptTokenCount!)
    // another key, another system instruction, or a prefix under the least count: nothing
    expect((await send(long, 'k2')).cachedContentTokenCount).toBeUndefined()
    expect((await send({ ...long, systemInstruction: { parts: [{ text: 'y'.repeat(12_000) }] } })).cachedContentTokenCount).toBeUndefined()
    await send({ contents: session(0) })
    expect((await send({ contents: session(0) })).cachedContentTokenCount).toBeUndefined()
  })
})

describe("Gemini summaries by the conversation's own model, in the conversation", () => {
  it("are written ahead with the gateway's GEMINI_API_KEY and the conversation's model, read its prefix from the implicit cache, and are taken at the crossing", async () => {
    const { app, fake, ai } = await gateway({})
    await untilCrossing(app, ai, 'gemini-own-1')
    const calls = fake.requests.filter(isSummaryCall)
    expect(calls).toHaveLength(1)
    const call = calls[0]!
    expect(call.path).toBe('/v1beta/models/gemini-test:generateContent')
    expect(call.headers['x-goog-api-key']).toBe(UPSTREAM_KEY)
    // the conversation as forwarded, then the doctrine as one more user content
    const before = fake.requests.filter((r) => !isSummaryCall(r) && r.body.contents!.length === call.body.contents!.length - 1).at(-1)!
    expect(call.body.contents!.slice(0, -1)).toEqual(before.body.contents)
    expect(call.body.systemInstruction).toEqual(before.body.systemInstruction)
    expect(JSON.stringify(call.body.contents!.at(-1))).toContain(JSON.stringify(DOCTRINE_TEXT).slice(1, 200))
    expect(call.cached! / call.tokens!).toBeGreaterThan(0.8)
    // taken at the crossing, recorded as the conversation model's
    const crossing = fake.requests.filter((r) => !isSummaryCall(r)).at(-1)!
    expect(JSON.stringify(crossing.body.contents)).toContain('(the conversation model)')
    const records = (await app.inject({ url: '/v1/sessions/gemini-own-1/compactions' })).json<{ compactions: { summarizer: unknown }[] }>()
    expect(records.compactions[0]!.summarizer).toMatchObject({ kind: 'gemini', model: 'gemini-test', calls: 1 })
    expect(fake.refused).toEqual([])
  })

  it('are not made with COMPACT_SUMMARIZER=extractive', async () => {
    const { app, fake, ai } = await gateway({ COMPACT_SUMMARIZER: 'extractive' })
    await untilCrossing(app, ai, 'gemini-own-2')
    expect(fake.requests.filter(isSummaryCall)).toEqual([])
  })
})
