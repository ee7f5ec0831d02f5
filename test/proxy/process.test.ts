import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { type ServerProcess, startServer } from '../helpers/process.js'

/**
 * The proxy as a client meets it: the server process, real sockets, and a model that goes quiet for
 * longer than the server's idle timeout (as one thinking for a minute does), before answering and
 * between the events of a stream. The relayed answer must not be cut by a socket timeout.
 */
describe('the proxy in a real process, with an upstream slower than the idle timeout', () => {
  let fake: FakeAnthropic
  let server: ServerProcess
  let sdk: Anthropic

  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    server = await startServer({
      ANTHROPIC_API_KEY: 'sk-ant-upstream-process-0000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: 'me=gw-process-key-1',
      COMPACT_IDLE_TIMEOUT_MS: '400',
      COMPACT_PRECOMPUTE_AT: 'off'
    })
    sdk = new Anthropic({ apiKey: 'gw-process-key-1', baseURL: server.url, maxRetries: 0, timeout: 20_000 })
  })
  afterAll(async () => {
    server.child.kill('SIGTERM')
    await server.exited
    await fake.close()
  })

  it('relays an answer that takes 2.5 times the idle timeout to begin', async () => {
    fake.fallback = { delayMs: 1_000, text: 'Worth the wait.' }
    const message = await sdk.messages.create({ model: 'claude-test', max_tokens: 16, messages: [{ role: 'user', content: 'think hard' }] })
    expect(message.content).toEqual([{ type: 'text', text: 'Worth the wait.' }])
  }, 20_000)

  it('relays a stream whose events are 1.3 times the idle timeout apart', async () => {
    fake.fallback = { text: 'slow', eventDelayMs: 520 }
    const final = await sdk.messages.stream({ model: 'claude-test', max_tokens: 16, messages: [{ role: 'user', content: 'stream slowly' }] }).finalMessage()
    expect(final.content).toEqual([{ type: 'text', text: 'slow' }])
  }, 30_000)
})
