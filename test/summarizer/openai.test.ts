import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import type { App } from '../../src/server/app.js'
import { ConfigError, loadConfig, setupLine } from '../../src/server/config.js'
import { readArguments } from '../../src/summarizer/openai.js'
import { testApp } from '../helpers/app.js'
import { FakeOpenAi, chatCompletionsRefusal } from '../helpers/fake-openai.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

/**
 * COMPACT_SUMMARIZER=openai: the summary written through the real `openai` SDK by an OpenAI-compatible
 * Chat Completions server (here a loopback one that refuses what the API refuses), under the same
 * doctrine, validation, retry, fallback, folding and cache as the Anthropic summarizer.
 */
let fake: FakeOpenAi
let app: App
const env = (extra: Record<string, string> = {}) => ({
  COMPACT_SUMMARIZER: 'openai',
  OPENAI_BASE_URL: `${fake.url}/v1`,
  OPENAI_API_KEY: 'sk-openai-test-000000000000',
  COMPACT_MODEL: 'gpt-test',
  COMPACT_SUMMARIZER_TIMEOUT_MS: '5000',
  COMPACT_CACHE_TTL_S: '0',
  ...extra
})

beforeAll(async () => {
  fake = await new FakeOpenAi().start()
  app = await testApp(env())
})
afterAll(async () => {
  await app.close()
  await fake.close()
})
beforeEach(() => {
  fake.requests.length = 0
  fake.refused.length = 0
  fake.fallback = { toolInput: { objective: 'fake summary' } }
})

const history: Message[] = [
  user('Please fix the flaky retry test in src/net/retry.ts'),
  assistant(call('r1', 'Read', { file_path: 'src/net/retry.ts' })),
  results(result('r1', 'export function retry() {}')),
  ...shellStep('s1', 'npm test -- retry', '<returncode>1</returncode>\nFAIL test/retry.test.ts\n  AssertionError: expected 3 retries, got 2'),
  assistant('Fixed the off-by-one in retry().'),
  user('Thanks. Now also add jitter to the backoff.'),
  assistant('Adding jitter.'),
  user('And run the whole suite when done.')
]
const compact = (body: Record<string, unknown>, target: App = app) => target.inject({ method: 'POST', url: '/v1/compact', payload: body })

describe('the OpenAI-compatible summarizer', () => {
  it('sends the doctrine as the system message and forces the summary function; the answer is the summary', async () => {
    fake.reply({ toolInput: { objective: 'Make the retry test pass', next_steps: ['Add jitter to the backoff'] } })
    const res = await compact({ messages: history, mode: 'manual', keep_turns: 1, instructions: 'focus on the retry logic' })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body.summarizer).toMatchObject({
      kind: 'openai',
      model: 'gpt-test',
      calls: 1,
      fallback_reason: null,
      input_tokens: expect.any(Number),
      output_tokens: 100
    })
    expect(body.summary.sections.objective).toBe('Make the retry test pass')
    expect(body.summary.sections.next_steps).toContain('Add jitter to the backoff')
    const [sent] = fake.requests
    expect(sent!.headers.authorization).toBe('Bearer sk-openai-test-000000000000')
    expect(sent!.body.model).toBe('gpt-test')
    expect(sent!.body.messages[0]).toEqual({ role: 'system', content: DOCTRINE_TEXT })
    expect(String(sent!.body.messages[1]!.content)).toContain('npm test -- retry')
    expect(String(sent!.body.messages[1]!.content)).toContain('focus on the retry logic')
    expect(sent!.body.tool_choice).toEqual({ type: 'function', function: { name: 'record_summary' } })
    expect(sent!.body.tools![0]!.function.parameters).toMatchObject({ type: 'object', properties: { objective: { type: 'string' } } })
  })

  it('retries an answer whose arguments are not the summary once, answering its call as the API requires', async () => {
    fake.reply({ rawArguments: '{"objective": ' }, { toolInput: { objective: 'second try' } })
    const body = (await compact({ messages: history, mode: 'manual', keep_turns: 1 })).json()
    expect(body.summarizer).toMatchObject({ kind: 'openai', calls: 2, fallback_reason: null })
    expect(body.summary.sections.objective).toBe('second try')
    const retry = fake.requests[1]!.body.messages
    expect(retry.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'record_summary' } }] })
    expect(retry.at(-1)).toMatchObject({ role: 'tool', tool_call_id: retry.at(-2)!.tool_calls![0]!.id, content: expect.stringContaining('not JSON') })
    expect(fake.refused).toEqual([])
  })

  it('falls back to the extractive summary, saying why: no call twice, a refusal, a rate limit after the SDK retried', async () => {
    for (const [replies, reason] of [
      [[{ text: 'Here is a summary in prose.' }, { text: 'Still prose.' }], 'no_tool_call'],
      [[{ refusal: 'I cannot help with that.' }], 'refusal'],
      [
        [
          { status: 429, headers: { 'retry-after-ms': '1' } },
          { status: 429, headers: { 'retry-after-ms': '1' } },
          { status: 429, headers: { 'retry-after-ms': '1' } }
        ],
        'rate_limited'
      ],
      [[{ status: 401 }], 'auth_error']
    ] as const) {
      fake.requests.length = 0
      fake.reply(...replies)
      const body = (await compact({ messages: history, mode: 'manual', keep_turns: 1 })).json()
      expect([reason, body.summarizer.kind, body.summarizer.fallback_reason]).toEqual([reason, 'extractive', reason])
      expect(body.summary.text).toContain('src/net/retry.ts')
    }
    expect(fake.refused).toEqual([])
  })

  it('folds a span too long for one call with COMPACT_FOLD_MODEL, and writes the last part with COMPACT_MODEL', async () => {
    const big = await testApp(env({ COMPACT_SUMMARIZER_INPUT_TOKENS: '20000', COMPACT_FOLD_MODEL: 'gpt-cheap' }))
    try {
      const messages: Message[] = [user('Port the whole parser to the new AST.')]
      for (let i = 0; i < 120; i++) messages.push(...shellStep(`b${i}`, `cat src/parser/part${i}.ts`, `// part ${i}\n${'const x = 1 // filler\n'.repeat(200)}`))
      messages.push(assistant('All parts ported.'), user('Now run the tests.'))
      const body = (await compact({ messages, mode: 'manual', keep_turns: 1, budget_tokens: 'off' }, big)).json()
      const models = fake.requests.map((r) => r.body.model)
      expect(models.length).toBeGreaterThanOrEqual(3)
      expect(models).toEqual([...Array(models.length - 1).fill('gpt-cheap'), 'gpt-test'])
      expect(String(fake.requests[1]!.body.messages[1]!.content)).toContain('The summary so far')
      expect(body.summarizer).toMatchObject({ kind: 'openai', model: 'gpt-test', calls: models.length })
      expect(fake.refused).toEqual([])
    } finally {
      await big.close()
    }
  })

  it('answers a repeated compaction from the summary cache, with no second call', async () => {
    const cached = await testApp(env({ COMPACT_CACHE_TTL_S: '60' }))
    try {
      const first = (await compact({ messages: history, mode: 'manual', keep_turns: 1 }, cached)).json()
      const again = (await compact({ messages: history, mode: 'manual', keep_turns: 1 }, cached)).json()
      expect(fake.requests).toHaveLength(1)
      expect([first.summarizer.kind, again.summarizer.kind]).toEqual(['openai', 'cache'])
      expect(again.summary.sections).toEqual(first.summary.sections)
    } finally {
      await cached.close()
    }
  })

  it('reads a call’s arguments, or says what is wrong with them', () => {
    expect(readArguments('{"objective":"x","next_steps":["y"]}')).toMatchObject({ sections: { objective: 'x', next_steps: ['y'] } })
    expect(readArguments('not json')).toEqual({ error: 'the record_summary arguments are not JSON' })
    expect(readArguments('{"next_steps":"y"}')).toEqual({ error: expect.stringContaining('/next_steps') })
  })
})

describe('the settings', () => {
  it('need a key or a base URL for openai, and a key for anthropic; auto is Anthropic with its key, else extractive', () => {
    expect(() => loadConfig({ COMPACT_SUMMARIZER: 'openai' })).toThrow(ConfigError)
    expect(() => loadConfig({ COMPACT_SUMMARIZER: 'openai' })).toThrow(
      'COMPACT_SUMMARIZER=openai needs OPENAI_API_KEY, or OPENAI_BASE_URL for a server that takes none'
    )
    expect(() => loadConfig({ COMPACT_SUMMARIZER: 'anthropic' })).toThrow('COMPACT_SUMMARIZER=anthropic needs ANTHROPIC_API_KEY')
    expect(() => loadConfig({ COMPACT_SUMMARIZER: 'gemini' })).toThrow('COMPACT_SUMMARIZER=gemini needs GEMINI_API_KEY')
    expect(() => loadConfig({ COMPACT_SUMMARIZER: 'mistral' })).toThrow(
      'invalid COMPACT_SUMMARIZER (got "mistral"): one of auto, anthropic, openai, gemini, extractive'
    )
    const ollama = loadConfig({
      COMPACT_SUMMARIZER: 'openai',
      OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1',
      COMPACT_MODEL: 'qwen3:32b',
      COMPACT_FOLD_MODEL: 'qwen3:4b'
    })
    expect(setupLine(ollama, 0)).toContain('summarizer openai qwen3:32b at 127.0.0.1:11434/v1, folding with qwen3:4b (fallback extractive), ')
  })

  it('reach a server that takes no key (Ollama, vLLM) with a placeholder', async () => {
    const keyless = await testApp(env({ OPENAI_API_KEY: '' }))
    try {
      expect((await compact({ messages: history, mode: 'manual', keep_turns: 1 }, keyless)).json().summarizer.kind).toBe('openai')
      expect(fake.requests[0]!.headers.authorization).toBe('Bearer none')
    } finally {
      await keyless.close()
    }
  })
})

describe('the fake server', () => {
  it('refuses what the Chat Completions API refuses', () => {
    const ok = { model: 'm', messages: [{ role: 'user', content: 'hi' }] }
    expect(chatCompletionsRefusal(JSON.stringify(ok))).toBeUndefined()
    expect(chatCompletionsRefusal(JSON.stringify({ ...ok, messages: [] }))).toContain('non-empty')
    expect(chatCompletionsRefusal('{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}')).toContain('unpaired surrogate')
    const unanswered = {
      model: 'm',
      messages: [
        { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'user', content: 'x' }
      ]
    }
    expect(chatCompletionsRefusal(JSON.stringify(unanswered))).toContain('c1')
    expect(chatCompletionsRefusal(JSON.stringify({ model: 'm', messages: [{ role: 'tool', tool_call_id: 'c9', content: 'x' }] }))).toContain("role 'tool'")
    expect(chatCompletionsRefusal(JSON.stringify({ ...ok, tools: [{ type: 'function', function: { name: 'a b' } }] }))).toContain('pattern')
    expect(chatCompletionsRefusal(JSON.stringify({ ...ok, tool_choice: { type: 'function', function: { name: 'f' } } }))).toContain("not found in 'tools'")
  })
})

describe('a summarizer asked for by name', () => {
  it('is the server’s model summarizer or a 400 naming the field: openai and model here, anthropic not', async () => {
    for (const summarizer of ['openai', 'model'])
      expect((await compact({ messages: history, mode: 'manual', keep_turns: 1, summarizer })).json().summarizer.kind).toBe('openai')
    const wrong = await compact({ messages: history, mode: 'manual', keep_turns: 1, summarizer: 'anthropic' })
    expect(wrong.statusCode).toBe(400)
    expect(wrong.json().error).toMatchObject({
      message: 'summarizer "anthropic" is not configured on this server (its model summarizer is openai)',
      path: '/summarizer'
    })
  })
})
