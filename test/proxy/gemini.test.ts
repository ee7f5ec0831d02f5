import type { AddressInfo } from 'node:net'
import { GoogleGenAI } from '@google/genai'
import { afterEach, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { until } from '../helpers/wait.js'
import { FakeGemini } from '../helpers/fake-gemini.js'

/**
 * Gemini's API through the gateway, driven by Google's own SDK (`@google/genai`) against a fake that refuses
 * what the API refuses: forwarded as sent under the budget, compacted past it into contents the API takes
 * (pairs intact, thought signatures where they were), streamed, counted, listed, recorded.
 */
type Content = { role: string; parts: Record<string, unknown>[] }

const UPSTREAM_KEY = 'gemini-upstream-key-000000000000'
const GATEWAY_KEY = 'gw-gemini-key-0000000001'
const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(env: Record<string, string> = {}): Promise<{ app: App; fake: FakeGemini; ai: GoogleGenAI; url: string }> {
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
    ...env
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const ai = new GoogleGenAI({ apiKey: GATEWAY_KEY, httpOptions: { baseUrl: url } })
  return { app, fake, ai, url }
}

/** A Gemini CLI session: read_file and run_shell_command calls with ids, each model content's first call carrying its thought signature. */
function session(steps: number): Content[] {
  const contents: Content[] = [{ role: 'user', parts: [{ text: 'Fix the failing parser test in src/parser.ts' }] }]
  for (let i = 0; i < steps; i++) {
    const name = i % 2 === 0 ? 'read_file' : 'run_shell_command'
    const args = name === 'read_file' ? { absolute_path: `/work/src/part_${i}.ts` } : { command: `npm test -- part_${i}` }
    contents.push({ role: 'model', parts: [{ functionCall: { id: `call-${i}`, name, args }, thoughtSignature: `c2lnLSR7aX0=${i}` }] })
    contents.push({ role: 'user', parts: [{ functionResponse: { id: `call-${i}`, name, response: { output: `${name} ${i}: ${'o'.repeat(4_000)}` } } }] })
  }
  contents.push({ role: 'model', parts: [{ text: 'Ran every step.' }] }, { role: 'user', parts: [{ text: 'Now run the whole suite' }] })
  return contents
}

describe("Gemini's API, proxied", () => {
  it('forwards a request under the budget byte for byte with the gateway key, and answers as the API does', async () => {
    const { fake, ai } = await gateway()
    const contents = session(2)
    const answer = await ai.models.generateContent({ model: 'gemini-test', contents, config: { systemInstruction: 'You are Gemini CLI.', temperature: 0 } })
    expect(answer.text).toBe('ok')
    expect(fake.refused).toEqual([])
    const sent = fake.requests.at(-1)!
    expect(sent.path).toBe('/v1beta/models/gemini-test:generateContent')
    expect(sent.headers['x-goog-api-key']).toBe(UPSTREAM_KEY)
    expect(sent.body.contents).toEqual(contents)
    expect(sent.body.generationConfig).toEqual({ temperature: 0 })
  })

  it('compacts past the budget into contents the API takes: the summary a user content, pairs and signatures intact; streamed and recorded', async () => {
    const { app, fake, ai } = await gateway()
    const contents = session(20)
    const stream = await ai.models.generateContentStream({
      model: 'gemini-test',
      contents,
      config: { httpOptions: { headers: { 'x-compaction-budget': '12000', 'x-compaction-session': 'gemini-1' } } }
    })
    let text = ''
    for await (const chunk of stream) text += chunk.text ?? ''
    expect(text).toBe('ok')
    expect(fake.refused).toEqual([])
    const sent = fake.requests.at(-1)!
    expect(sent.path).toBe('/v1beta/models/gemini-test:streamGenerateContent?alt=sse')
    const forwarded = sent.body.contents as Content[]
    expect(forwarded.length).toBeLessThan(contents.length)
    expect(forwarded[0]!.role).toBe('user')
    expect(forwarded[0]!.parts[0]!.text).toContain('Fix the failing parser test')
    // the kept contents are the client's own, the newest as sent
    expect(forwarded.at(-1)).toEqual(contents.at(-1))
    for (const c of forwarded.slice(1)) if (c.role === 'model' && c.parts.some((p) => p.functionCall)) expect(c.parts[0]!.thoughtSignature).toBeDefined()
    const records = (await app.inject({ method: 'GET', url: '/v1/sessions/gemini-1/compactions', headers: { 'x-api-key': GATEWAY_KEY } })).json<{
      compactions: { stats: { context_after_compaction: number } }[]
    }>()
    expect(records.compactions).toHaveLength(1)
    expect(records.compactions[0]!.stats.context_after_compaction).toBeLessThanOrEqual(12_000)
  })

  it("counts every generation's usage metadata into the session's cost, plain and streamed (a token count bills nothing)", async () => {
    const { app, ai } = await gateway()
    const config = { httpOptions: { headers: { 'x-compaction-session': 'gemini-usage-1' } } }
    await ai.models.generateContent({ model: 'gemini-test', contents: session(1), config })
    for await (const chunk of await ai.models.generateContentStream({ model: 'gemini-test', contents: session(2), config })) void chunk
    await ai.models.countTokens({ model: 'gemini-test', contents: session(1), config })
    const read = async () =>
      (await app.inject({ url: '/v1/sessions/gemini-usage-1/cost', headers: { 'x-api-key': GATEWAY_KEY } })).json<{
        requests: number
        upstream: Record<string, number>
      }>()
    await until('the two generations are counted', async () => (await read()).upstream.output_tokens === 4)
    const cost = await read()
    // (the fake answers 2 candidate tokens a generation, and its stream's last chunk holds the counts)
    expect(cost.requests).toBe(2)
    expect(cost.upstream).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 4 })
    expect(cost.upstream.input_tokens).toBeGreaterThan(0)
  })

  it('counts tokens and lists models through the gateway, and takes the key in the query as Gemini clients send it', async () => {
    const { fake, ai, url } = await gateway()
    const counted = await ai.models.countTokens({ model: 'gemini-test', contents: session(1) })
    expect(counted.totalTokens).toBeGreaterThan(0)
    expect(fake.requests.at(-1)!.path).toBe('/v1beta/models/gemini-test:countTokens')
    const listed = await fetch(`${url}/v1beta/models?key=${GATEWAY_KEY}`)
    expect(listed.status, await listed.clone().text()).toBe(200)
    expect(((await listed.json()) as { models: { name: string }[] }).models[0]!.name).toBe('models/gemini-test')
    const byQuery = await fetch(`${url}/v1beta/models/gemini-test:generateContent?key=${GATEWAY_KEY}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: session(1) })
    })
    expect(byQuery.status, await byQuery.clone().text()).toBe(200)
    // the client's key never goes upstream, in the query or a header
    expect(fake.requests.at(-1)!.path).toBe('/v1beta/models/gemini-test:generateContent')
    expect(fake.requests.at(-1)!.headers['x-goog-api-key']).toBe(UPSTREAM_KEY)
    const refused = await fetch(`${url}/v1beta/models/gemini-test:generateContent?key=wrong-key-000000000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: session(1) })
    })
    expect(refused.status).toBe(401)
    // the gateway's own refusals in Gemini's error shape
    expect(await refused.json()).toEqual({ error: { code: 401, message: expect.any(String), status: 'UNAUTHENTICATED' } })
    const unknown = await fetch(`${url}/v1beta/models/gemini-test:embedContent?key=${GATEWAY_KEY}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}'
    })
    expect(await unknown.json()).toEqual({
      error: { code: 404, message: expect.stringContaining('generateContent, streamGenerateContent and countTokens'), status: 'NOT_FOUND' }
    })
    // an action named after what every object inherits is no action either
    for (const inherited of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      const res = await fetch(`${url}/v1beta/models/gemini-test:${inherited}?key=${GATEWAY_KEY}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}'
      })
      expect(res.status, inherited).toBe(404)
    }
  })

  it("passes the API's refusal back as it gave it, and refuses a history it cannot compact, naming the content", async () => {
    const { fake, ai } = await gateway()
    const orphan = [
      { role: 'user', parts: [{ text: 'go' }] },
      { role: 'user', parts: [{ functionResponse: { name: 'read_file', response: { output: 'x' } } }] }
    ]
    const upstream = await ai.models.generateContent({ model: 'gemini-test', contents: orphan }).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(String((upstream as Error).message)).toMatch(/function response turn comes immediately after a function call turn/)
    expect(fake.refused).toHaveLength(1)
    const big = [...session(20).slice(0, -1), ...orphan.slice(1)]
    const ours = await ai.models
      .generateContent({ model: 'gemini-test', contents: big, config: { httpOptions: { headers: { 'x-compaction-budget': '12000' } } } })
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect(String((ours as Error).message)).toMatch(/contents\[\d+\]: answers call \\?"read_file#0/)
    expect(String((ours as Error).message)).toContain('INVALID_ARGUMENT')
    expect(fake.requests).toHaveLength(1)
  })
})
