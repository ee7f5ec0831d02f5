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
