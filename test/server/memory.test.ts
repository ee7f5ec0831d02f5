import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { recallFacts } from '../../bench/recall.js'
import type { Message } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import type { RecallHit } from '../../src/storage/store.js'
import { testApp } from '../helpers/app.js'
import { allTranscripts } from '../helpers/corpus.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'
import { CLI_ENTRY, ROOT, nodeArgs, startServer, tempDb } from '../helpers/process.js'
import { plantSecrets } from '../helpers/secrets.js'

type Hit = RecallHit

const KEYS = 'alpha=key-alpha-0123456789abcdef,beta=key-beta-0123456789abcdef'
const as = (name: 'alpha' | 'beta') => ({ authorization: `Bearer key-${name}-0123456789abcdef` })

async function compact(app: App, session: string, messages: Message[], headers: Record<string, string> = as('alpha'), extra: Record<string, unknown> = {}) {
  const res = await app.inject({ method: 'POST', url: '/v1/compact', headers, payload: { mode: 'manual', session_id: session, messages, ...extra } })
  expect(res.statusCode, res.body).toBe(200)
  return res.json() as { kept_from: number; summary: { id: string; text: string }; messages: Message[] }
}

async function recall(
  app: App,
  session: string,
  query: string,
  headers: Record<string, string> = as('alpha'),
  extra: Record<string, unknown> = {}
): Promise<Hit[]> {
  const res = await app.inject({ method: 'POST', url: `/v1/sessions/${encodeURIComponent(session)}/recall`, headers, payload: { query, limit: 5, ...extra } })
  expect(res.statusCode, res.body).toBe(200)
  return (res.json() as { results: Hit[] }).results
}

describe('the cold layer', () => {
  it('finds facts of the removed span by a few of their words, citing the message they came from', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS, COMPACT_RATE_LIMIT_PER_MIN: '100000' })
    let total = 0
    let found = 0
    const kinds = new Set<string>()
    for (const t of allTranscripts()) {
      const out = await compact(app, t.name, t.messages)
      for (const fact of recallFacts(t.messages.slice(0, out.kept_from))) {
        total++
        const hits = await recall(app, t.name, fact.query)
        if (
          hits.some(
            (h) =>
              h.compaction_id === out.summary.id && (fact.inText ? h.text.includes(fact.text) : h.messages[0] <= fact.message && fact.message <= h.messages[1])
          )
        ) {
          found++
          kinds.add(fact.kind)
        }
      }
    }
    expect(total).toBeGreaterThanOrEqual(5)
    expect(found / total).toBeGreaterThanOrEqual(0.9)
    expect([...kinds].sort()).toEqual([
      'command',
      'exception line',
      'late sentence of a request',
      'later line of a multi-line command',
      'plain output line',
      'signal line of a command that succeeded'
    ])
    await app.close()
  })

  it('returns no planted secret, and another key finds nothing of the session', async () => {
    const app = await testApp({ COMPACT_API_KEYS: KEYS })
    const planted = plantSecrets()
    const messages: Message[] = [
      user(`deploy the billing service; the settings are\n${planted.map((p) => p.text).join('\n')}`),
      ...shellStep('a', `deploy --env prod ${planted[3]!.text}`, `deploying\nError: upstream refused ${planted[4]!.text}\n<returncode>1</returncode>`, true),
      assistant('the billing deploy failed'),
      user('try again'),
      assistant('retrying')
    ]
    const out = await compact(app, 'billing', messages)
    expect(out.kept_from).toBeGreaterThan(0)
    const hits = [...(await recall(app, 'billing', 'deploy billing service settings')), ...(await recall(app, 'billing', 'upstream refused deploying'))]
    expect(hits.length).toBeGreaterThan(0)
    const text = JSON.stringify(hits)
    for (const p of planted) expect(text.includes(p.secret), p.kind).toBe(false)
    expect(text).toContain('[REDACTED:')
    expect(await recall(app, 'billing', 'deploy billing service settings', as('beta'))).toEqual([])
    expect((await app.inject({ url: '/v1/sessions/billing/recap', headers: as('beta') })).statusCode).toBe(404)
    await app.close()
  })

  it('finds the middle of a huge prompt the hard bound clipped from the tail', async () => {
    const app = await testApp()
    const filler = (n: number) => Array.from({ length: n }, (_, i) => `Paragraph ${i} restates the context of the migration plan in some detail.`).join('\n')
    const prompt = `${filler(3_000)}\nThe orchestra tuning fork must vibrate at exactly four hundred forty hertz.\n${filler(3_000)}`
    const messages: Message[] = [user('first task'), assistant('done'), user(prompt)]
    const res = await app.inject({ method: 'POST', url: '/v1/compact', payload: { session_id: 'huge', messages, budget_tokens: 45_000 } })
    expect(res.statusCode).toBe(200)
    const body = res.json() as { clips: { kind: string; message_index: number }[] }
    expect(body.clips).toEqual([expect.objectContaining({ kind: 'prompt', message_index: 2 })])
    const hits = await recall(app, 'huge', 'orchestra tuning fork hertz', {})
    expect(hits[0]).toMatchObject({ kind: 'ask', messages: [2, 2] })
    expect(hits[0]!.text).toContain('four hundred forty hertz')
    await app.close()
  })

  it('keeps a session across a restart, gives its recap, and names the recall tool in the summary turn', async () => {
    const db = tempDb()
    const history: Message[] = [
      user('rename the config loader to settings'),
      assistant(call('a', 'bash', { command: 'git mv loader.py settings.py' })),
      results(result('a', 'ok')),
      assistant('renamed'),
      user('now update the imports')
    ]
    const first = await testApp({ COMPACT_DB: db })
    const out = await compact(first, 'rename', history, {})
    expect(JSON.stringify(out.messages[0])).toContain('`recall` tool')
    const without = await first.inject({ method: 'POST', url: '/v1/compact', payload: { mode: 'manual', messages: history } })
    expect(JSON.stringify(without.json().messages[0])).not.toContain('`recall` tool')
    await first.close()

    const second = await testApp({ COMPACT_DB: db })
    const hits = await recall(second, 'rename', 'git mv loader', {})
    expect(hits[0]).toMatchObject({ kind: 'command', compaction_id: out.summary.id, messages: [1, 2] })
    const recap = await second.inject({ url: '/v1/sessions/rename/recap' })
    expect(recap.json()).toMatchObject({ session_id: 'rename', compactions: 1, summary: { id: out.summary.id, text: out.summary.text } })
    const tool = await second.inject({ url: '/v1/tools/recall' })
    expect(tool.json()).toMatchObject({ name: 'recall', input_schema: { type: 'object', required: ['query'] } })
    expect((await recall(second, 'rename', 'git mv loader', {}, { kinds: ['ask'] })).map((h) => h.kind)).toEqual(['ask'])
    expect(await recall(second, 'rename', 'git mv loader', {}, { kinds: ['evidence'] })).toEqual([])
    const metrics = (await second.inject({ url: '/metrics' })).body
    expect(metrics).toMatch(/compaction_recall_requests_total\{outcome="hits"\} 2/)
    expect(metrics).toMatch(/compaction_recall_requests_total\{outcome="empty"\} 1/)
    await second.close()
  })

  it('answers a query of only punctuation or FTS operators with no results, never an error', async () => {
    const app = await testApp()
    await compact(app, 's', [user('a task about parsing'), assistant('ok'), user('more')], {})
    for (const q of ['"', '***', 'AND OR NOT', '(a) NEAR(b', '-']) expect(await recall(app, 's', q, {})).toBeInstanceOf(Array)
    await app.close()
  })

  it('is searched from the command line: recall SESSION QUERY and recap SESSION', async () => {
    const server = await startServer()
    try {
      const res = await fetch(`${server.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ mode: 'manual', session_id: 'cli', messages: [user('port the scheduler to asyncio'), assistant('ok'), user('go on')] })
      })
      expect(res.status).toBe(200)
      const run = (args: string[]) =>
        new Promise<{ code: number | null; out: string }>((resolve) => {
          const child = spawn(process.execPath, nodeArgs(CLI_ENTRY, ...args, '--url', server.url), { cwd: ROOT })
          let out = ''
          child.stdout.on('data', (d: Buffer) => (out += d.toString()))
          child.stderr.on('data', (d: Buffer) => (out += d.toString()))
          child.once('exit', (code) => resolve({ code, out }))
        })
      const found = await run(['recall', 'cli', 'scheduler', 'asyncio'])
      expect(found.code).toBe(0)
      expect(found.out).toMatch(/1\. \[ask\] messages 0–0 of cmp_\w+/)
      expect(found.out).toContain('port the scheduler to asyncio')
      const recap = await run(['recap', 'cli'])
      expect(recap.code).toBe(0)
      expect(recap.out).toContain('1 compaction, the latest at')
      expect(recap.out).toContain('<compaction-summary')
      expect((await run(['recap', 'nobody'])).code).toBe(4)
    } finally {
      server.child.kill('SIGKILL')
    }
  }, 30_000)
})
