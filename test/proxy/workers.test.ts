import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'

/**
 * A proxy's crossing runs where the route's compactions run: in a worker where the app has workers and the
 * body is large enough, else on the main thread; what is forwarded is the same either way, and the client's
 * kept messages are forwarded as the very bytes it sent.
 */

/** A session past a 2,000-token budget, whose newest tool input holds number literals JSON.parse does not give back as written. */
function session(): Message[] {
  const messages: Message[] = [user('Fix the failing parser test in src/parse.ts')]
  for (let i = 0; i < 30; i++) messages.push(...shellStep(`toolu_${i}`, `cat src/module_${i}.ts`, `line ${i}: ${'x'.repeat(1_500)} 😀`))
  messages.push(assistant('Read them all.'), user('Now update docs/parser.md to match'))
  return messages
}
const ODD = '{"role":"assistant","content":[{"type":"tool_use","id":"toolu_odd","name":"bash","input":{"command":"ls","n":12345678901234567890123,"e":1e400}}]}'
const ODD_RESULT = '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_odd","content":"a.ts"}]}'

function body(messages: Message[]): string {
  const json = messages.map((m) => JSON.stringify(m))
  // the odd step goes before the last prompt: it is kept raw, and must be forwarded as it was written
  json.splice(json.length - 1, 0, JSON.stringify(user('List the files')), ODD, ODD_RESULT, JSON.stringify(assistant('Listed.')))
  return `{"model":"claude-test","max_tokens":64,"messages":[${json.join(',')}]}`
}

/** A forwarded body with the ids of its summaries made alike (each app makes its own). */
const alike = (raw: string): string => raw.replace(/cmp_[0-9a-f]{32}/g, 'cmp_ID')

describe("a proxy's crossing, in a worker and inline", () => {
  let fake: FakeAnthropic
  let inline: App
  let workers: App
  beforeAll(async () => {
    fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'ok' }
    const env = { ANTHROPIC_BASE_URL: fake.url, COMPACT_PRECOMPUTE_AT: 'off' }
    inline = await testApp({ ...env, COMPACT_WORKERS: '0' })
    workers = await testApp({ ...env, COMPACT_WORKERS: '1', COMPACT_WORKER_MIN_KB: '16' })
  })
  afterAll(async () => {
    await Promise.all([inline.close(), workers.close()])
    await fake.close()
  })

  async function forward(app: App, payload: string, session: string): Promise<{ status: number; raw: string | undefined; answer: string }> {
    const before = fake.requests.length
    const res = await app.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'sk-ant-client-own-key-000000',
        'x-compaction-budget': '2000',
        'x-compaction-session': session
      },
      payload
    })
    return { status: res.statusCode, raw: fake.requests.slice(before).at(-1)?.raw, answer: res.body }
  }

  it('runs a large one in a worker, and forwards what the main thread would, the kept messages as the client wrote them', async () => {
    const pool = workers.compaction.pool
    if (!pool) throw new Error('the app has no workers')
    const ran = vi.spyOn(pool, 'runProxied')
    const payload = body(session())
    const here = await forward(inline, payload, 's-1')
    const there = await forward(workers, payload, 's-1')
    expect(ran).toHaveBeenCalledTimes(1)
    expect(here.status).toBe(200)
    expect(there.status).toBe(200)
    expect(there.raw).toContain('<compaction-summary ')
    expect(there.raw).toContain(ODD)
    expect(alike(there.raw ?? '')).toBe(alike(here.raw ?? ''))
    // the conversation's next request is answered from what the worker's crossing left (its anchor)
    const next = body([...session(), assistant('Updated.'), user('Thanks; run the tests')])
    const hereNext = await forward(inline, next, 's-1')
    const thereNext = await forward(workers, next, 's-1')
    expect(alike(thereNext.raw ?? '')).toBe(alike(hereNext.raw ?? ''))
  })

  it('runs a small one on the main thread', async () => {
    const pool = workers.compaction.pool
    if (!pool) throw new Error('the app has no workers')
    const ran = vi.spyOn(pool, 'runProxied')
    ran.mockClear()
    // past the budget, under the workers' 16 KB
    const small = [user('Fix it'), ...shellStep('toolu_s', 'cat a.ts', 'y'.repeat(9_000)), assistant('Read it.'), user('Now the docs')]
    const there = await forward(workers, JSON.stringify({ model: 'claude-test', max_tokens: 64, messages: small }), 's-2')
    expect(there.status).toBe(200)
    expect(there.raw).toContain('<compaction-summary ')
    expect(ran).not.toHaveBeenCalled()
  })

  it("refuses a history that breaks a conversation's rules in a worker as on the main thread, naming the client's place", async () => {
    const broken = session()
    // a result whose call is nowhere, in place of one whose call is there
    broken[9] = { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nowhere', content: 'x' }] }
    const payload = JSON.stringify({ model: 'claude-test', max_tokens: 64, messages: broken })
    const pool = workers.compaction.pool
    if (!pool) throw new Error('the app has no workers')
    const ran = vi.spyOn(pool, 'runProxied')
    ran.mockClear()
    const here = await forward(inline, payload, 's-3')
    const there = await forward(workers, payload, 's-3')
    expect(ran).toHaveBeenCalledTimes(1)
    expect(here.status).toBe(400)
    expect(JSON.parse(here.answer)).toMatchObject({ error: { path: '/messages/9' } })
    expect(there).toEqual(here)
  })
})
