import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { chatCompletionsRefusal, responsesInputRefusal } from '../helpers/fake-openai.js'
import { responseValidator } from '../helpers/openapi.js'
import { tempDb } from '../helpers/process.js'

/** POST /v1/compact with `format`: inline and, for a large body, in a worker; answered in the format asked in, in the contract. */
const check = responseValidator()
let app: App
beforeAll(async () => {
  app = await testApp({ COMPACT_DB: tempDb(), COMPACT_WORKERS: '1', COMPACT_WORKER_MIN_KB: '64' })
})
afterAll(async () => app.close())

function chat(steps: number, size: number): Record<string, unknown>[] {
  const items: Record<string, unknown>[] = [
    { role: 'system', content: 'You are an agent.' },
    { role: 'user', content: 'Fix the build.' }
  ]
  for (let k = 0; k < steps; k++) {
    items.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: `c${k}`, type: 'function', function: { name: 'shell', arguments: JSON.stringify({ command: `make part${k}` }) } }]
    })
    items.push({ role: 'tool', tool_call_id: `c${k}`, content: `make: *** [part${k}] Error 2\n${'o'.repeat(size)}` })
  }
  items.push({ role: 'user', content: 'again' })
  return items
}

describe('/v1/compact in other formats', () => {
  it.each([
    ['inline', 20, 500],
    ['in a worker', 60, 3_000]
  ])('answers Chat Completions messages in their format (%s), in the contract, a request the API takes; records the budget', async (_where, steps, size) => {
    const messages = chat(steps, size)
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      payload: { format: 'openai-chat', messages, mode: 'manual', budget_tokens: 30_000, session_id: `fmt-${steps}` }
    })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(check('POST', '/v1/compact', 200, body)).toEqual([])
    expect(body.messages[0]).toEqual(messages[0])
    expect(body.messages.slice(2)).toEqual(messages.slice(body.kept_from))
    expect(chatCompletionsRefusal(JSON.stringify({ model: 'm', messages: body.messages }))).toBeUndefined()
    const records = (await app.inject({ method: 'GET', url: `/v1/sessions/fmt-${steps}/timeline` })).json()
    expect(records.points).toEqual([expect.objectContaining({ budget_tokens: 30_000 })])
  })

  it('answers Responses input items in their format', async () => {
    const messages = [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
      { role: 'user', content: 'list the files' },
      { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'gAAAA' },
      { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{"command":["ls"]}' },
      { type: 'function_call_output', call_id: 'c1', output: 'a.ts' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'One file.' }] },
      { role: 'user', content: 'thanks' }
    ]
    const res = await app.inject({ method: 'POST', url: '/v1/compact', payload: { format: 'openai-responses', messages, mode: 'manual', keep_turns: 1 } })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(check('POST', '/v1/compact', 200, body)).toEqual([])
    expect(body.messages[0]).toEqual(messages[0])
    expect(body.messages[1]).toMatchObject({ type: 'message', role: 'user' })
    expect(body.messages.slice(2)).toEqual(messages.slice(body.kept_from))
    expect(responsesInputRefusal(body.messages)).toBeUndefined()
    // counted by the format it came in (once the answer has gone: the count is made as its request ends)
    const metrics = async (): Promise<string> => (await app.inject({ method: 'GET', url: '/metrics' })).body
    await expect.poll(metrics).toContain('compaction_requests_total{mode="manual",outcome="manual",format="openai-responses"} 1')
    const counted = (await metrics()).split('\n').filter((l) => l.startsWith('compaction_requests_total') && !l.endsWith(' 0'))
    expect(counted).toContain('compaction_requests_total{mode="manual",outcome="manual",format="openai-chat"} 2')
  })

  it('refuses an unknown format, and still checks a Messages API history as strictly as before', async () => {
    const bad = await app.inject({ method: 'POST', url: '/v1/compact', payload: { format: 'mistral', messages: [{ role: 'user', content: 'x' }] } })
    expect(bad.statusCode).toBe(400)
    expect(bad.json().error.path).toBe('/format')
    // a Gemini history is read as Gemini's contents: a content without parts is refused at its place
    const gemini = await app.inject({ method: 'POST', url: '/v1/compact', payload: { format: 'gemini', messages: [{ role: 'user', content: 'x' }] } })
    expect(gemini.statusCode).toBe(400)
    expect(gemini.json().error.path).toBe('/messages/0/parts')
    const role = await app.inject({ method: 'POST', url: '/v1/compact', payload: { messages: [{ role: 'tool', content: 'x' }] } })
    expect(role.statusCode).toBe(400)
    expect(role.json().error).toMatchObject({ path: '/messages/0/role', message: expect.stringContaining('body.messages[0].role must be') })
    const chatShape = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      payload: {
        format: 'openai-chat',
        messages: [
          { role: 'user', content: 'x' },
          { role: 'tool', content: 'y' }
        ]
      }
    })
    expect(chatShape.statusCode).toBe(400)
    expect(chatShape.json().error.path).toBe('/messages/1/tool_call_id')
  })
})
