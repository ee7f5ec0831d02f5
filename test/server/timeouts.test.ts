import { describe, expect, it } from 'vitest'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, user } from '../helpers/history.js'
import { runToExit, startServer } from '../helpers/process.js'
import { until } from '../helpers/wait.js'

/** Server timeouts far below the model's delay: none of them may cut a compaction being worked on. */
const SHORT_SERVER_TIMEOUTS = { COMPACT_IDLE_TIMEOUT_MS: '1000', COMPACT_BODY_TIMEOUT_MS: '2000' }

function compact(url: string, n: number): Promise<Response> {
  return fetch(`${url}/v1/compact`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ mode: 'manual', messages: [user(`task ${n}`), assistant('working'), user('go on')] }),
    // undici's own default would cut at 300 s; the server must answer long before
    signal: AbortSignal.timeout(60_000)
  })
}

interface Answer {
  summarizer: { kind: string; fallback_reason: string | null }
  summary: { sections: { objective: string } }
}

describe('a real process with a slow model', () => {
  it.concurrent(
    'answers 200 from a model that takes 12 s (past the old 10 s socket timeout and every server timeout), and from the request queued behind it',
    async () => {
      const fake = await new FakeAnthropic().start()
      fake.reply({ delayMs: 12_000, toolInput: { objective: 'the slow one' } })
      fake.fallback = { delayMs: 100, toolInput: { objective: 'the queued one' } }
      const server = await startServer({
        ANTHROPIC_API_KEY: 'sk-ant-test-slow-000000000000',
        ANTHROPIC_BASE_URL: fake.url,
        COMPACT_SUMMARIZER_TIMEOUT_MS: '30000',
        COMPACT_MAX_SUMMARIES: '1',
        ...SHORT_SERVER_TIMEOUTS
      })
      try {
        const first = compact(server.url, 1)
        await until('the model is called', () => fake.requests.length > 0)
        const queued = compact(server.url, 2)
        const [a, b] = await Promise.all([first, queued])
        expect(a.status).toBe(200)
        expect(b.status).toBe(200)
        const bodyA = (await a.json()) as Answer
        const bodyB = (await b.json()) as Answer
        expect(bodyA.summarizer).toMatchObject({ kind: 'anthropic', fallback_reason: null })
        expect(bodyA.summary.sections.objective).toBe('the slow one')
        expect(bodyB.summary.sections.objective).toBe('the queued one')
      } finally {
        server.child.kill('SIGKILL')
        await fake.close()
      }
    },
    40_000
  )

  it.concurrent(
    'answers 200 with the extractive fallback, never an empty reply, when the model is past the summarizer deadline',
    async () => {
      const fake = await new FakeAnthropic().start()
      fake.fallback = { delayMs: 8_000, toolInput: { objective: 'too late' } }
      const server = await startServer({
        ANTHROPIC_API_KEY: 'sk-ant-test-late-000000000000',
        ANTHROPIC_BASE_URL: fake.url,
        COMPACT_SUMMARIZER_TIMEOUT_MS: '3000',
        ...SHORT_SERVER_TIMEOUTS
      })
      try {
        const res = await compact(server.url, 3)
        expect(res.status).toBe(200)
        const body = (await res.json()) as Answer
        // the model was asked, and the answer came without it: the deadline, not a failure, ended the wait
        expect(fake.requests.length).toBeGreaterThan(0)
        expect(body.summarizer).toMatchObject({ kind: 'extractive', fallback_reason: 'timeout' })
      } finally {
        server.child.kill('SIGKILL')
        await fake.close()
      }
    },
    30_000
  )

  it.concurrent('a COMPACT_DB that cannot be created ends the process with exit 78 and the reason, at once', async () => {
    // (a spin that never ends, as before, meets the test's timeout)
    const { code, stderr } = await runToExit({ COMPACT_DB: '/proc/compaction-gateway/x/y.db' })
    expect(code).toBe(78)
    expect(stderr).toContain('COMPACT_DB')
    expect(stderr).toContain('/proc/compaction-gateway')
  })
})
