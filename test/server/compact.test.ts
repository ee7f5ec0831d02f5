import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Message, validateHistory } from '../../src/compaction/index.js'
import type { App } from '../../src/server/app.js'
import { FIXTURE_DIR, loadTranscripts } from '../helpers/corpus.js'
import { testApp } from '../helpers/app.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

const transcripts = loadTranscripts(FIXTURE_DIR)
const django = transcripts.find((t) => t.name.includes('django'))!

let app: App
beforeAll(async () => {
  app = await testApp()
})
afterAll(async () => {
  await app.close()
})

const compact = (payload: unknown) => app.inject({ method: 'POST', url: '/v1/compact', payload: payload as Record<string, unknown> })

describe('POST /v1/compact', () => {
  it('compacts a real history over budget: summary turn plus the kept tail, every field reported', async () => {
    const res = await compact({
      messages: django.messages,
      system: django.system,
      budget_tokens: 20_000,
      session_id: 'sess-1',
      recall_hint: 'search with `session search`'
    })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body).toMatchObject({ compacted: true, reason: 'over_budget', doctrine_version: expect.any(String) })
    expect(validateHistory(body.messages)).toBeUndefined()
    const opensWithUser = django.messages[body.kept_from]!.role === 'user'
    expect(body.messages.slice(1)).toEqual(django.messages.slice(body.kept_from + (opensWithUser ? 1 : 0)))
    expect(body.summary.text).toMatch(/^<compaction-summary id="cmp_[0-9a-f]+" version="1"/)
    expect(body.summary.sections.user_requests.length).toBeGreaterThan(0)
    expect(JSON.stringify(body.messages[0])).toContain('session search')
    expect(body.stats.context_after_compaction).toBeLessThanOrEqual(20_000)
    expect(body.stats.kept_tokens).toBeLessThanOrEqual(Math.floor(20_000 / 3))
    expect(body.stats.raw_history_tokens).toBeGreaterThan(20_000)
    expect(body.summarizer).toMatchObject({ kind: 'extractive', model: null, calls: 0, fallback_reason: 'no_api_key' })
    expect(res.headers['server-timing']).toMatch(/validate;dur=[\d.]+, plan;dur=[\d.]+, summarize;dur=[\d.]+, total;dur=[\d.]+/)
    expect(res.headers['x-request-id']).toMatch(/[0-9a-f-]{36}/)
  })

  it('leaves a history under budget alone', async () => {
    const res = await compact({ messages: [user('hi'), assistant('hello'), user('more')] })
    expect(res.json()).toMatchObject({ compacted: false, reason: 'under_budget', kept_from: 0 })
    expect(res.json().messages).toBeUndefined()
  })

  it('never compacts in auto mode with the budget off, and always in manual mode', async () => {
    expect((await compact({ messages: django.messages, budget_tokens: 'off' })).json().reason).toBe('disabled')
    const manual = await compact({ messages: [user('hi'), assistant('hello'), user('more')], mode: 'manual' })
    expect(manual.json()).toMatchObject({ compacted: true, reason: 'manual', kept_from: 2 })
  })

  it('plans without summarizing on a dry run', async () => {
    const res = await compact({ messages: django.messages, budget_tokens: 20_000, dry_run: true })
    const body = res.json()
    expect(body).toMatchObject({ compacted: false, reason: 'dry_run' })
    expect(body.kept_from).toBeGreaterThan(0)
    expect(body.summary).toBeUndefined()
    expect(body.stats.kept_messages).toBe(django.messages.length - body.kept_from)
  })

  it('returns the tail exactly as sent, unknown fields and block types included', async () => {
    const odd: Message[] = [
      user('start'),
      assistant('ok'),
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look', cache_control: { type: 'ephemeral' } },
          { type: 'future_block', data: [1, 2] }
        ]
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'seen', citations: [{ type: 'char_location', cited_text: 'x' }] },
          call('t1', 'bash', { command: 'ls', nested: { a: [1] } })
        ]
      },
      results(result('t1', [{ type: 'text', text: 'a.txt' }]))
    ]
    const res = await compact({ messages: odd, mode: 'manual', keep_turns: 1 })
    const body = res.json()
    expect(body.kept_from).toBe(2)
    expect(body.messages[0].content.slice(2)).toEqual(odd[2]!.content)
    expect(body.messages.slice(1)).toEqual(odd.slice(3))
  })

  it("calibrates the estimate to the provider's reported usage, cache tokens included", async () => {
    const plain = (await compact({ messages: django.messages, dry_run: true, mode: 'manual' })).json()
    const raw = plain.stats.raw_history_tokens
    const scaled = (
      await compact({
        messages: django.messages,
        dry_run: true,
        mode: 'manual',
        usage: { input_tokens: raw, cache_read_input_tokens: Math.floor(raw / 2), output_tokens: 12 }
      })
    ).json()
    expect(scaled.stats.estimate_scale).toBeCloseTo(1.5, 1)
    expect(scaled.stats.raw_history_tokens).toBeGreaterThan(raw * 1.45)
  })

  it('reports the clip of a huge newest tool result', async () => {
    const huge = 'x'.repeat(400_000)
    const res = await compact({
      messages: [user('go'), assistant(call('a', 'bash', { command: 'cat big' })), results(result('a', huge))],
      mode: 'manual',
      keep_tokens: 5_000
    })
    const body = res.json()
    expect(body.clips).toEqual([
      {
        kind: 'tool_result',
        message_index: 2,
        block_index: 0,
        path: '/messages/2/content/0/content',
        tool_use_id: 'a',
        original_chars: 400_000,
        kept_chars: expect.any(Number)
      }
    ])
    expect(body.stats.clipped_tool_results).toBe(1)
    expect(body.stats.kept_tokens).toBeLessThanOrEqual(5_000)
  })

  it('keeps the budget when the newest prompt alone is 400K characters: the prompt is clipped head and tail, and reported', async () => {
    const prompt = `START ${'context '.repeat(57_000)} END`
    const res = await compact({ messages: [user('first task'), assistant('done'), user(prompt)], budget_tokens: 45_000 })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body.stats.context_after_compaction).toBeLessThanOrEqual(45_000)
    expect(body.clips).toEqual([
      { kind: 'prompt', message_index: 2, path: '/messages/2/content', original_chars: prompt.length, kept_chars: expect.any(Number) }
    ])
    const kept = (body.messages as Message[]).at(-1)!.content as unknown as { text: string }[]
    const text = kept.at(-1)!.text
    expect(text.startsWith('START')).toBe(true)
    expect(text.endsWith('END')).toBe(true)
    expect(text).toMatch(/\[… \d+ characters clipped by compaction-gateway …\]/)
  })

  it('clips assistant text, thinking and every long string of a tool input in the newest step, naming each', async () => {
    const big = (c: string) => c.repeat(200_000)
    const messages = [
      user('go'),
      assistant('ok'),
      user('write it'),
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: big('t'), signature: 'sig' },
          { type: 'text', text: big('a') },
          { type: 'tool_use', id: 'w', name: 'str_replace_editor', input: { command: 'str_replace', path: 'a.py', old_str: big('o'), new_str: big('n') } }
        ]
      },
      results(result('w', 'done'))
    ]
    const res = await compact({ messages, budget_tokens: 45_000 })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body.stats.context_after_compaction).toBeLessThanOrEqual(45_000)
    expect(body.clips.map((c: { kind: string; path: string }) => `${c.kind} ${c.path}`).sort()).toEqual([
      'text /messages/3/content/1/text',
      'thinking /messages/3/content/0/thinking',
      'tool_input /messages/3/content/2/input/new_str',
      'tool_input /messages/3/content/2/input/old_str'
    ])
    expect(body.clips.filter((c: { tool_use_id?: string }) => c.tool_use_id === 'w')).toHaveLength(2)
  })

  it('422 when the newest step cannot fit even clipped to markers (forty images), naming it and the figures', async () => {
    const images = Array.from({ length: 40 }, () => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }))
    const res = await compact({ messages: [user('a'), assistant('b'), { role: 'user', content: images }], budget_tokens: 45_000 })
    expect(res.statusCode).toBe(422)
    expect(res.json().error).toMatchObject({
      path: '/messages/2',
      message: expect.stringMatching(/needs \d+ tokens even with every text of it clipped, over the \d+ tokens left for it \(budget_tokens 45000/)
    })
  })
})

describe('errors', () => {
  it('400 names an unknown field', async () => {
    const res = await compact({ messages: [user('x')], budget: 5 })
    expect(res.statusCode).toBe(400)
    expect(res.json()).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'body.budget is not a known field', path: '/budget' } })
  })

  it('400 names a bad role deep in the history', async () => {
    const res = await compact({ messages: [user('x'), { role: 'robot', content: 'y' }] })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.path).toBe('/messages/1/role')
    expect(res.json().error.message).toContain('body.messages[1].role')
  })

  it('400 for a missing field and for a malformed block', async () => {
    expect((await compact({ mode: 'auto' })).json().error).toMatchObject({ path: '/', message: 'body needs the field `messages`' })
    const res = await compact({ messages: [user('x'), { role: 'assistant', content: [{ type: 'tool_use', name: 'bash', input: {} }] }] })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.path).toBe('/messages/1/content/0')
  })

  it('422 names the tool_use left unanswered', async () => {
    const res = await compact({ messages: [user('x'), assistant(call('a', 'bash', { command: 'ls' })), user('hm')] })
    expect(res.statusCode).toBe(422)
    expect(res.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining('messages[1].content[0]'), path: '/messages/1/content/0' }
    })
  })

  it('400 when the anthropic summarizer is asked for and not configured', async () => {
    const res = await compact({ messages: [user('a'), assistant('b'), user('c')], mode: 'manual', summarizer: 'anthropic' })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.path).toBe('/summarizer')
  })

  it('400 for a body that is not JSON', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/compact', headers: { 'content-type': 'application/json' }, payload: '{"messages": [' })
    expect(res.statusCode).toBe(400)
    expect(res.json().type).toBe('error')
  })

  it('400 for a body that could poison prototypes', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'content-type': 'application/json' },
      payload: '{"messages": [{"role": "user", "content": "x"}], "__proto__": {"polluted": true}}'
    })
    expect(res.statusCode).toBe(400)
    expect(res.json().error).toMatchObject({ path: '/__proto__', message: expect.stringContaining('could poison a prototype') })
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('404 in the one error shape', async () => {
    const res = await app.inject({ method: 'GET', url: '/nope?x=1' })
    expect(res.statusCode).toBe(404)
    expect(res.json()).toEqual({ type: 'error', error: { type: 'not_found_error', message: 'no route for GET /nope' } })
  })

  it('413 over the body limit', async () => {
    const small = await testApp({ COMPACT_BODY_LIMIT_MB: '0.01' })
    const res = await small.inject({ method: 'POST', url: '/v1/compact', payload: { messages: [user('x'.repeat(20_000))] } })
    expect(res.statusCode).toBe(413)
    expect(res.json().error.type).toBe('request_too_large')
    await small.close()
  })

  it('500 hides what went wrong', async () => {
    const broken = await testApp()
    broken.get('/boom', async () => {
      throw new Error('secret internals at /srv/db')
    })
    const res = await broken.inject({ method: 'GET', url: '/boom' })
    expect(res.statusCode).toBe(500)
    expect(res.json()).toEqual({ type: 'error', error: { type: 'api_error', message: 'internal error' } })
    await broken.close()
  })
})

describe('other routes', () => {
  it('serves liveness, readiness and the doctrine', async () => {
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' })
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200)
    const doctrine = (await app.inject({ url: '/v1/doctrine' })).json()
    expect(doctrine.version).toMatch(/\d{4}-\d{2}-\d{2}/)
    expect(doctrine.sha256).toMatch(/^[0-9a-f]{64}$/)
    expect(doctrine.text).toContain('Keep exact paths')
  })
})
