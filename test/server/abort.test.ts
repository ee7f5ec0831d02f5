import { describe, expect, it } from 'vitest'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { startServer } from '../helpers/process.js'
import { until } from '../helpers/wait.js'

describe('a client that hangs up', () => {
  it('leaves its model call running, so that its retry shares the call instead of paying for a second one', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 1_500, toolInput: { objective: 'summarized once' } }
    const server = await startServer({
      ANTHROPIC_API_KEY: 'sk-ant-test-abort-0000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_SUMMARIZER_TIMEOUT_MS: '20000'
    })
    const body = JSON.stringify({ mode: 'manual', messages: [user('a task'), assistant('ok'), user('go')] })
    const post = (signal?: AbortSignal) =>
      fetch(`${server.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, ...(signal ? { signal } : {}) })
    try {
      const client = new AbortController()
      const first = post(client.signal).catch((err: unknown) => err)
      await until('the model is called', () => fake.requests.length > 0)
      client.abort()
      expect(await first).toBeInstanceOf(Error)
      const retry = await post()
      expect(retry.status).toBe(200)
      const answer = (await retry.json()) as { summary: { sections: { objective: string } }; summarizer: { kind: string } }
      expect(answer.summary.sections.objective).toBe('summarized once')
      expect(answer.summarizer.kind).toBe('cache')
      expect(fake.requests).toHaveLength(1)
      expect(fake.aborted).toBe(0)
    } finally {
      server.child.kill('SIGKILL')
      await fake.close()
    }
  }, 30_000)
})
