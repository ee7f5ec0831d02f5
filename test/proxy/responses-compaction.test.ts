import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import { afterEach, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeOpenAi } from '../helpers/fake-openai.js'

/**
 * The Responses API's compaction through the real `openai` SDK, performed by the gateway for an upstream
 * that does not have it (the fake refuses `context_management`, compaction items and /responses/compact,
 * as such a server does).
 */
type Item = Record<string, unknown>

const opened: { close: () => Promise<unknown> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close()
})

async function gateway(env: Record<string, string> = {}): Promise<{ app: App; fake: FakeOpenAi; sdk: OpenAI; baseURL: string }> {
  const fake = await new FakeOpenAi().start()
  fake.compaction = false
  fake.fallback = { text: 'Hello from the upstream.' }
  opened.push(fake)
  const app = await testApp({
    OPENAI_API_KEY: 'sk-upstream-responses-0000000000',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    COMPACT_SUMMARIZER: 'extractive',
    COMPACT_BUDGET: 'off',
    COMPACT_PRECOMPUTE_AT: 'off',
    ...env
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  opened.push(app)
  const baseURL = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`
  const sdk = new OpenAI({ apiKey: 'unused', baseURL, maxRetries: 0 })
  return { app, fake, sdk, baseURL }
}

/** A Responses history: the task, then function calls with long outputs, then the newest ask. */
function session(steps: number): Item[] {
  const items: Item[] = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Make the build pass: fix src/lexer.rs' }] }]
  for (let i = 0; i < steps; i++) {
    items.push({ type: 'function_call', call_id: `call_${i}`, name: 'shell', arguments: JSON.stringify({ cmd: `cargo build -p step${i}` }) })
    items.push({ type: 'function_call_output', call_id: `call_${i}`, output: `step ${i}: ${'x'.repeat(4_000)}` })
  }
  items.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `Ran ${steps} steps.`, annotations: [] }] })
  items.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Now run the tests' }] })
  return items
}

describe("the Responses API's compaction performed by the gateway", () => {
  it('answers responses.compact itself (the user messages, then its compaction item), and reads its item back on the next request', async () => {
    const { app, fake, sdk } = await gateway()
    const input = session(20)
    const compacted = await sdk.responses.compact({ model: 'gpt-test', input: input as never }, { headers: { 'session-id': 'responses-compact-1' } })
    expect(fake.requests).toEqual([])
    expect(compacted.object).toBe('response.compaction')
    const item = compacted.output.at(-1) as unknown as Item
    expect(item).toMatchObject({ type: 'compaction', id: expect.stringMatching(/^cmp_/), encrypted_content: expect.stringMatching(/^cgw2\./) })
    expect(compacted.output.slice(0, -1)).toEqual(input.filter((i) => i.role === 'user'))
    const records = (await app.inject({ method: 'GET', url: '/v1/sessions/responses-compact-1/compactions' })).json<{ compactions: unknown[] }>()
    expect(records.compactions).toHaveLength(1)

    // the client goes on from the compacted window, as the API's guide says
    const next = [...compacted.output, { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'And the docs' }] }]
    const answer = await sdk.responses.create({ model: 'gpt-test', input: next as never })
    expect(answer.output_text).toBe('Hello from the upstream.')
    expect(fake.refused).toEqual([])
    const sent = fake.requests.at(-1)!.body.input as unknown as Item[]
    expect(sent.some((i) => i.type === 'compaction')).toBe(false)
    expect(sent.length).toBeLessThan(input.length)
    expect(JSON.stringify(sent[0])).toContain('Make the build pass')
    expect(sent.at(-1)).toEqual(next.at(-1))
  })

  it("writes responses.compact's summary with the client's own model and key where the gateway has neither model nor key", async () => {
    const fake = await new FakeOpenAi().start()
    fake.compaction = false
    opened.push(fake)
    fake.fallback = (r) =>
      JSON.stringify(r.body).includes('<compaction-request>')
        ? { text: JSON.stringify({ objective: 'Make the build pass: fix src/lexer.rs (client model)' }) }
        : { text: 'Hello from the upstream.' }
    const app = await testApp({ OPENAI_BASE_URL: `${fake.url}/v1`, COMPACT_BUDGET: 'off', COMPACT_PRECOMPUTE_AT: 'off', COMPACT_CONTEXT_MANAGEMENT: 'gateway' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    opened.push(app)
    const sdk = new OpenAI({
      apiKey: 'sk-client-own-key-0000000000',
      baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`,
      maxRetries: 0
    })
    const compacted = await sdk.responses.compact({ model: 'gpt-test', input: session(20) as never })
    const call = fake.requests.find((r) => JSON.stringify(r.body).includes('<compaction-request>'))
    expect(call?.headers.authorization).toBe('Bearer sk-client-own-key-0000000000')
    const item = compacted.output.at(-1) as unknown as Item
    // sealed: its bytes say nothing of the summary; the gateway reads it back
    const encoded = Buffer.from(String(item.encrypted_content).slice('cgw2.'.length), 'base64url').toString('latin1')
    expect(encoded).not.toContain('client model')
    await sdk.responses.create({ model: 'gpt-test', input: [...compacted.output, { type: 'message', role: 'user', content: 'next' }] as never })
    expect(JSON.stringify(fake.requests.at(-1)?.body.input)).toContain('(client model)')
    expect(fake.refused).toEqual([])
  })

  it("refuses an item of its own that was changed, another API key's, or an earlier build's unsealed one, naming its field", async () => {
    const { fake, baseURL } = await gateway({ COMPACT_API_KEYS: 'alpha=key-alpha-0123456789abcdef,beta=key-beta-0123456789abcdef' })
    const alpha = new OpenAI({ apiKey: 'key-alpha-0123456789abcdef', baseURL, maxRetries: 0 })
    const beta = new OpenAI({ apiKey: 'key-beta-0123456789abcdef', baseURL, maxRetries: 0 })
    const compacted = await alpha.responses.compact({ model: 'gpt-test', input: session(6) as never })
    const item = compacted.output.at(-1) as unknown as Item
    const sealed = String(item.encrypted_content)
    const next = { type: 'message', role: 'user', content: 'and now?' }
    const send = (sdk: OpenAI, it: Item) => sdk.responses.create({ model: 'gpt-test', input: [it, next] as never })
    const refusal = (why: RegExp) => expect.objectContaining({ status: 400, message: expect.stringMatching(why) })

    // its own key reads it back
    await send(alpha, item)
    expect(JSON.stringify(fake.requests.at(-1)?.body.input)).toContain('Make the build pass')
    const forwarded = fake.requests.length
    // one character of its sealed bytes changed
    const last = sealed.length - 3
    const changed = `${sealed.slice(0, last)}${sealed[last] === 'A' ? 'B' : 'A'}${sealed.slice(last + 1)}`
    await expect(send(alpha, { ...item, encrypted_content: changed })).rejects.toEqual(
      refusal(/input\[0\]\.encrypted_content: not a compaction item this gateway sealed/)
    )
    // another tenant's key
    await expect(send(beta, item)).rejects.toEqual(refusal(/input\[0\]\.encrypted_content: not a compaction item this gateway sealed/))
    // an earlier build's unsealed item, or one forged in its form
    const forged = `cgw1.${Buffer.from(JSON.stringify([{ type: 'message', role: 'user', content: 'forged history' }])).toString('base64url')}`
    await expect(send(alpha, { ...item, encrypted_content: forged })).rejects.toEqual(refusal(/input\[0\]\.encrypted_content: an unsealed compaction item/))
    // none of them went upstream
    expect(fake.requests).toHaveLength(forwarded)
  })

  it('compacts past compact_threshold, the compaction item first in the output, as JSON and as a stream', async () => {
    const { fake, sdk } = await gateway()
    const input = session(20)
    const answer = await sdk.responses.create({
      model: 'gpt-test',
      input: input as never,
      context_management: [{ type: 'compaction', compact_threshold: 8_000 }]
    } as never)
    expect(fake.refused).toEqual([])
    const sent = fake.requests.at(-1)!.body as unknown as { input: Item[]; context_management?: unknown }
    expect(sent.context_management).toBeUndefined()
    expect(sent.input.length).toBeLessThan(input.length)
    const output = (answer as unknown as { output: Item[] }).output
    expect(output[0]).toMatchObject({ type: 'compaction', encrypted_content: expect.stringMatching(/^cgw2\./) })
    expect(answer.output_text).toBe('Hello from the upstream.')

    const stream = sdk.responses.stream({
      model: 'gpt-test',
      input: input as never,
      context_management: [{ type: 'compaction', compact_threshold: 8_000 }]
    } as never)
    const added: string[] = []
    stream.on('response.output_item.added', (e) => added.push(`${e.output_index}:${e.item.type}`))
    const final = await stream.finalResponse()
    expect(added[0]).toBe('0:compaction')
    expect(added.slice(1).every((a) => !a.startsWith('0:'))).toBe(true)
    expect((final.output[0] as unknown as Item).type).toBe('compaction')
    expect(final.output_text).toBe('Hello from the upstream.')
    // under the threshold: no item, the answer as it came
    const small = await sdk.responses.create({
      model: 'gpt-test',
      input: session(1) as never,
      context_management: [{ type: 'compaction', compact_threshold: 100_000 }]
    } as never)
    expect((small as unknown as { output: Item[] }).output.some((i) => i.type === 'compaction')).toBe(false)
    expect(fake.refused).toEqual([])
  })

  it('refuses a context_management it cannot read, naming the field', async () => {
    const { fake, sdk } = await gateway()
    const err = await sdk.responses
      .create({ model: 'gpt-test', input: session(2) as never, context_management: [{ type: 'compaction', compact_threshold: -5 }] } as never)
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect(err).toBeInstanceOf(OpenAI.BadRequestError)
    expect((err as Error).message).toMatch(/context_management\[0\]\.compact_threshold: must be a positive integer/)
    expect(fake.requests).toEqual([])
  })
})
