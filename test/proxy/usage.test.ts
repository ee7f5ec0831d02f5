import { describe, expect, it } from 'vitest'
import { UsageTap } from '../../src/proxy/usage.js'

const sse = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`

describe('the usage of an answer read as it passes', () => {
  it("takes an event stream's message_start counts and message_delta's later ones, whatever the chunks' cuts", () => {
    const text =
      sse('message_start', {
        type: 'message_start',
        message: { id: 'm', usage: { input_tokens: 12, cache_creation_input_tokens: 300, cache_read_input_tokens: 4_000, output_tokens: 1 } }
      }) +
      sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a "usage" word 🎉 in the text' } }) +
      sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 57 } }) +
      sse('message_stop', { type: 'message_stop' })
    const bytes = Buffer.from(text)
    // every chunk size, so that a cut falls inside every line, every `"usage"` and the emoji's bytes
    for (let cut = 1; cut <= bytes.length; cut++) {
      const tap = new UsageTap(true)
      for (let i = 0; i < bytes.length; i += cut) tap.push(bytes.subarray(i, i + cut))
      expect(tap.end()).toEqual({ input_tokens: 12, cache_creation_input_tokens: 300, cache_read_input_tokens: 4_000, output_tokens: 57 })
    }
  })

  it("takes a JSON answer's usage once it has all come, and nothing from an answer without one", () => {
    const tap = new UsageTap(false)
    const body = Buffer.from(JSON.stringify({ id: 'm', content: [{ type: 'text', text: 'ok' }], usage: { input_tokens: 5, output_tokens: 2 } }))
    tap.push(body.subarray(0, 10))
    tap.push(body.subarray(10))
    expect(tap.end()).toEqual({ input_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 2 })
    const none = new UsageTap(false)
    none.push(Buffer.from('{"type":"error","error":{"type":"overloaded_error"}}'))
    expect(none.end()).toBeUndefined()
    const garbage = new UsageTap(true)
    garbage.push(Buffer.from('data: {"usage": not json}\n\n'))
    expect(garbage.end()).toBeUndefined()
  })
})

describe("the other APIs' usage, read into the Messages API's terms (cached input a cache read, the rest input)", () => {
  const data = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`
  /** The usage a tap reads from `text`, fed in chunks of every size. */
  const tapped = (format: 'chat' | 'responses' | 'gemini', stream: boolean, text: string) => {
    const bytes = Buffer.from(text)
    const seen = new Set<string>()
    for (let cut = 1; cut <= bytes.length; cut += stream ? 1 : bytes.length) {
      const tap = new UsageTap(stream, format)
      for (let i = 0; i < bytes.length; i += cut) tap.push(bytes.subarray(i, i + cut))
      seen.add(JSON.stringify(tap.end() ?? null))
    }
    expect(seen.size).toBe(1)
    return JSON.parse([...seen][0] as string) as unknown
  }

  it("Chat Completions: a JSON answer's usage, and a stream's last chunk where the client asked for it (none otherwise)", () => {
    const usage = { prompt_tokens: 1_200, completion_tokens: 40, prompt_tokens_details: { cached_tokens: 1_024 } }
    const expected = { input_tokens: 176, cache_creation_input_tokens: 0, cache_read_input_tokens: 1_024, output_tokens: 40 }
    expect(tapped('chat', false, JSON.stringify({ id: 'c', choices: [{ message: { role: 'assistant', content: 'a "usage" 🎉' } }], usage }))).toEqual(expected)
    const chunk = (content: string) => ({ id: 'c', choices: [{ index: 0, delta: { content } }], usage: null })
    const streamed = data(chunk('a "usage" 🎉')) + data(chunk('b')) + data({ id: 'c', choices: [], usage }) + 'data: [DONE]\n\n'
    expect(tapped('chat', true, streamed)).toEqual(expected)
    expect(tapped('chat', true, data(chunk('a')) + 'data: [DONE]\n\n')).toBeNull()
  })

  it("the Responses API: a JSON answer's usage, and a stream's response.completed (its earlier events' null usage left alone)", () => {
    const usage = { input_tokens: 5_000, input_tokens_details: { cached_tokens: 4_096 }, output_tokens: 300, output_tokens_details: { reasoning_tokens: 200 } }
    const expected = { input_tokens: 904, cache_creation_input_tokens: 0, cache_read_input_tokens: 4_096, output_tokens: 300 }
    expect(tapped('responses', false, JSON.stringify({ id: 'r', object: 'response', output: [], usage }))).toEqual(expected)
    const streamed =
      `event: response.created\n${data({ type: 'response.created', response: { id: 'r', usage: null } })}` +
      `event: response.output_text.delta\n${data({ type: 'response.output_text.delta', delta: '"usage" 🎉' })}` +
      `event: response.completed\n${data({ type: 'response.completed', response: { id: 'r', usage } })}`
    expect(tapped('responses', true, streamed)).toEqual(expected)
  })

  it("Gemini: a JSON answer's usage metadata, each chunk's counts so far in a stream (the last stands), thoughts as output, and a stream sent as one JSON array", () => {
    const meta = (candidates: number) => ({
      promptTokenCount: 3_000,
      cachedContentTokenCount: 2_048,
      candidatesTokenCount: candidates,
      thoughtsTokenCount: 100
    })
    const expected = { input_tokens: 952, cache_creation_input_tokens: 0, cache_read_input_tokens: 2_048, output_tokens: 180 }
    const chunk = (text: string, candidates: number) => ({ candidates: [{ content: { role: 'model', parts: [{ text }] } }], usageMetadata: meta(candidates) })
    expect(tapped('gemini', false, JSON.stringify(chunk('done', 80)))).toEqual(expected)
    expect(tapped('gemini', true, data(chunk('a "usageMetadata" 🎉', 10)) + data(chunk('b', 80)))).toEqual(expected)
    expect(tapped('gemini', false, JSON.stringify([chunk('a', 10), chunk('b', 80)]))).toEqual(expected)
  })
})
