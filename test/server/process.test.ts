import { describe, expect, it } from 'vitest'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { CLI_ENTRY, ROOT, runToExit, startServer, tempDb } from '../helpers/process.js'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

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
          `^compaction-gateway \\S+ at ${server.url.replace(/\./g, '\\.')}: sqlite \\S+, redis off, summarizer extractive \\(no ANTHROPIC_API_KEY; proxied conversations summarized by the client's own model, COMPACT_SUMMARIZER=extractive to turn off\\), (?:\\d+ workers \\(bodies from \\d+ KB\\)|compactions inline), budget \\d+ tokens, no API keys \\(open\\), session keys not wrapped \\(no COMPACT_MASTER_KEY\\)$`
        )
      )
    } finally {
      server.child.kill('SIGTERM')
    }
    expect(await server.exited).toBe(0)
  })

  it('wraps its session keys under a master key a command gives: said at start and in /readyz; a restart without it reads nothing; `rewrap` rotates it', async () => {
    const db = tempDb()
    const OLD = 'the master key a vault gives, 32 characters at least'
    const NEW = 'the master key of the rotation, 32 characters at least'
    const recall = async (url: string): Promise<{ status: number; text: string }> => {
      const res = await fetch(`${url}/v1/sessions/mk-proc/recall`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: 'the', limit: 1 })
      })
      return { status: res.status, text: await res.text() }
    }
    const first = await startServer({ COMPACT_DB: db, COMPACT_MASTER_KEY_COMMAND: `printf %s '${OLD}'` })
    let found: string
    try {
      expect(await (await fetch(`${first.url}/readyz`)).json()).toEqual({ status: 'ready', checks: { store: 'ok', keys: 'wrapped under a master key' } })
      const t = loadTranscripts(FIXTURE_DIR)[0]!
      const res = await fetch(`${first.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: t.messages, mode: 'manual', session_id: 'mk-proc' })
      })
      expect(res.status).toBe(200)
      const hits = await recall(first.url)
      expect(hits.status).toBe(200)
      found = hits.text
      expect(JSON.parse(found).results.length).toBe(1)
      expect(first.stdout()).toMatch(/session keys wrapped \(master key [0-9a-f]{16}\)/)
      expect(first.stdout()).not.toContain(OLD)
    } finally {
      first.child.kill('SIGTERM')
    }
    expect(await first.exited).toBe(0)
    // without the master key: a warning at start, and the session does not open
    const bare = await startServer({ COMPACT_DB: db })
    try {
      expect(await (await fetch(`${bare.url}/readyz`)).json()).toMatchObject({ checks: { keys: 'not wrapped (no COMPACT_MASTER_KEY)' } })
      expect(bare.stdout()).toContain('"event":"keys_not_wrapped"')
      const hits = await recall(bare.url)
      expect(hits.status).toBeGreaterThanOrEqual(500)
      expect(hits.text).not.toContain(JSON.parse(found).results[0].text)
    } finally {
      bare.child.kill('SIGTERM')
    }
    await bare.exited
    // the rotation: rewrap under the new key, the old one given as previous; then the new key alone reads
    const rewrap = spawnSync(process.execPath, [join(ROOT, CLI_ENTRY), 'rewrap'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', COMPACT_DB: db, COMPACT_MASTER_KEY: NEW, COMPACT_MASTER_KEY_PREVIOUS: OLD },
      encoding: 'utf8'
    })
    expect(rewrap.status, rewrap.stderr).toBe(0)
    expect(rewrap.stdout).toMatch(/^1 session keys; 1 wrapped anew under master key [0-9a-f]{16}\n$/)
    const after = await startServer({ COMPACT_DB: db, COMPACT_MASTER_KEY: NEW })
    try {
      expect(await recall(after.url)).toEqual({ status: 200, text: found })
    } finally {
      after.child.kill('SIGTERM')
    }
    await after.exited
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
