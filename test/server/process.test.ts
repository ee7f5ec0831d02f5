import { describe, expect, it } from 'vitest'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { runToExit, startServer } from '../helpers/process.js'

/** Polls until `read` returns something, for output a child process writes asynchronously. */
async function eventually<T>(read: () => T | undefined, ms = 5_000): Promise<T | undefined> {
  const end = Date.now() + ms
  for (;;) {
    const value = read()
    if (value !== undefined || Date.now() > end) return value
    await new Promise((r) => setTimeout(r, 25))
  }
}

describe('the real server process', () => {
  it('starts with the embedded defaults, compacts over HTTP, and exits 0 on SIGTERM', async () => {
    const server = await startServer()
    try {
      expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ status: 'ok' })
      const t = loadTranscripts(FIXTURE_DIR)[0]!
      const res = await fetch(`${server.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: t.messages, mode: 'manual', session_id: 'proc-test' })
      })
      expect(res.status).toBe(200)
      const body = (await res.json()) as { compacted: boolean; summarizer: { kind: string } }
      expect(body.compacted).toBe(true)
      expect(body.summarizer.kind).toBe('extractive')
      // one JSON line per event, with the compaction's stats
      const event = await eventually(() =>
        server
          .stdout()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, unknown>)
          .find((l) => l.event === 'context_compacted')
      )
      expect(event).toMatchObject({ session_id: 'proc-test', summarizer: 'extractive', reason: 'manual', compacted_turns: expect.any(Number) })
      // one line at start says how the process is set up
      const started = server
        .stdout()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { event?: string; msg?: string })
        .find((l) => l.event === 'started')
      expect(started?.msg).toMatch(
        new RegExp(
          `^compaction-gateway \\S+ at ${server.url.replace(/\./g, '\\.')}: sqlite \\S+, redis off, summarizer extractive \\(no ANTHROPIC_API_KEY; proxied conversations summarized by the client's own model, COMPACT_SUMMARIZER=extractive to turn off\\), (?:\\d+ workers \\(bodies from \\d+ KB\\)|compactions inline), budget \\d+ tokens, no API keys \\(open\\)$`
        )
      )
    } finally {
      server.child.kill('SIGTERM')
    }
    expect(await server.exited).toBe(0)
  })

  it('refuses to start on a bad setting, naming it', async () => {
    const { code, stderr } = await runToExit({ PORT: 'eighty' })
    expect(code).toBe(78)
    expect(stderr).toContain('invalid PORT (got "eighty")')
  })

  it('refuses a public address without API keys', async () => {
    const { code, stderr } = await runToExit({ HOST: '0.0.0.0', PORT: '0' })
    expect(code).toBe(78)
    expect(stderr).toContain('without COMPACT_API_KEYS')
  })
})
