import { describe, expect, it } from 'vitest'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { startServer } from '../helpers/process.js'

describe('graceful shutdown', () => {
  it('lets an in-flight compaction finish on SIGTERM, answers it 200, and exits 0', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { delayMs: 1_500, toolInput: { objective: 'slow but sure' } }
    const server = await startServer({ ANTHROPIC_API_KEY: 'sk-ant-test-shutdown-0000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_SUMMARIZER_TIMEOUT_MS: '10000', COMPACT_IDLE_TIMEOUT_MS: '500' })
    try {
      const pending = fetch(`${server.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [user('a'), assistant('b'), user('c')], mode: 'manual' })
      })
      // SIGTERM only once the model call is under way
      for (let i = 0; i < 200 && fake.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
      expect(fake.requests).toHaveLength(1)
      server.child.kill('SIGTERM')
      const res = await pending
      expect(res.status).toBe(200)
      const body = (await res.json()) as { summarizer: { kind: string }; summary: { sections: { objective: string } } }
      expect(body.summarizer.kind).toBe('anthropic')
      expect(body.summary.sections.objective).toBe('slow but sure')
      expect(await server.exited).toBe(0)
      // once closed, it takes nothing new
      await expect(fetch(`${server.url}/healthz`)).rejects.toThrow()
    } finally {
      server.child.kill('SIGKILL')
      await fake.close()
    }
  })
})
