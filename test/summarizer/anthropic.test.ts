import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Message, emptySections, formatSummary } from '../../src/compaction/index.js'
import { DOCTRINE_TEXT } from '../../src/prompts/doctrine.js'
import type { App } from '../../src/server/app.js'
import { PLANTED_SECRETS, plantedText } from '../helpers/planted.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic, RETRY_AT_ONCE, requestText } from '../helpers/fake-anthropic.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

// the fake answers in milliseconds; a timeout is the one case that waits for it
const TIMEOUT_MS = 1_000
const KEY = 'sk-ant-test-0000000000000000000000'

let fake: FakeAnthropic
let app: App
const env = (extra: Record<string, string> = {}) => ({
  ANTHROPIC_API_KEY: KEY,
  ANTHROPIC_BASE_URL: fake.url,
  COMPACT_MODEL: 'claude-test-model',
  COMPACT_SUMMARIZER_TIMEOUT_MS: String(TIMEOUT_MS),
  // These tests are about the model call; a cached summary would answer the repeated histories instead.
  COMPACT_CACHE_TTL_S: '0',
  ...extra
})

beforeAll(async () => {
  fake = await new FakeAnthropic().start()
  app = await testApp(env())
})
afterAll(async () => {
  await app.close()
  await fake.close()
})
beforeEach(() => {
  fake.requests.length = 0
  fake.fallback = { toolInput: { objective: 'fake summary' } }
})

/** A span with a file edited, a file read, a failing command and two requests, then a kept turn. */
const history: Message[] = [
  user('Please fix the flaky retry test in src/net/retry.ts'),
  assistant(call('r1', 'Read', { file_path: 'src/net/retry.ts' })),
  results(result('r1', 'export function retry() {}')),
  ...shellStep('s1', 'npm test -- retry', '<returncode>1</returncode>\nFAIL test/retry.test.ts\n  AssertionError: expected 3 retries, got 2'),
  assistant(call('e1', 'Edit', { file_path: 'src/net/retry.ts', old_string: 'a', new_string: 'b' })),
  results(result('e1', 'ok')),
  assistant('Fixed the off-by-one in retry().'),
  user('Thanks. Now also add jitter to the backoff.'),
  assistant('Adding jitter.'),
  user('And run the whole suite when done.')
]

const compact = (body: Record<string, unknown>, target: App = app) => target.inject({ method: 'POST', url: '/v1/compact', payload: body })

describe('the request the model receives', () => {
  it('carries the doctrine as system prompt, the forced tool, the rendered span, the prior summary and the instructions', async () => {
    const prior = emptySections()
    prior.files_modified = ['src/old/legacy.ts — removed the v1 client']
    prior.key_decisions = ['Keep the v2 API stable']
    const priorText = formatSummary(prior, { id: 'cmp_prior', compactedTurns: 3 })
    const withPrior: Message[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: priorText },
          { type: 'text', text: 'Continue please.' }
        ]
      },
      assistant('Sure.'),
      ...history
    ]
    const res = await compact({ messages: withPrior, mode: 'manual', keep_turns: 1, instructions: 'focus on the retry bug' })
    expect(res.statusCode).toBe(200)
    expect(fake.requests).toHaveLength(1)
    const [req] = fake.requests
    // this SDK version sends the key as a bearer token
    expect(req!.headers.authorization ?? req!.headers['x-api-key']).toContain(KEY)
    expect(req!.body.model).toBe('claude-test-model')
    // the doctrine, marked for the cache: the prefix every summary call shares
    expect(req!.body.system).toEqual([{ type: 'text', text: DOCTRINE_TEXT, cache_control: { type: 'ephemeral' } }])
    expect(req!.body.tool_choice).toEqual({ type: 'tool', name: 'record_summary' })
    expect(req!.body.tools.map((t) => t.name)).toEqual(['record_summary'])
    expect(req!.body).not.toHaveProperty('temperature')
    const text = requestText(req!)
    expect(text).toContain('npm test -- retry')
    expect(text).toContain('AssertionError: expected 3 retries, got 2')
    expect(text).toContain('src/old/legacy.ts — removed the v1 client')
    expect(text).toContain('Keep the v2 API stable')
    expect(text).toContain('focus on the retry bug')
    // the prior summary is passed as the summary to merge into, not as the user speaking
    expect(text).not.toContain('<compaction-summary id=\\"cmp_prior\\"')
    const body = res.json()
    expect(body.summarizer).toMatchObject({ kind: 'anthropic', model: 'claude-test-model', calls: 1, fallback_reason: null })
    expect(body.summarizer.input_tokens).toBeGreaterThan(1_000)
    // the fake bills the tool call's characters as the answer's tokens
    expect(body.summarizer.output_tokens).toBeGreaterThan(0)
  })
})

describe('the guard', () => {
  it('fills a nearly empty model answer with every ledger file and the newest request, verbatim', async () => {
    fake.reply({ toolInput: {} })
    const res = await compact({ messages: history, mode: 'manual', keep_turns: 1 })
    const body = res.json()
    expect(body.summarizer.kind).toBe('anthropic')
    expect(body.summary.sections.files_modified.join('\n')).toContain('src/net/retry.ts')
    expect(body.summary.sections.user_requests).toContain('Thanks. Now also add jitter to the backoff.')
    expect(body.summary.sections.user_requests).toContain('Please fix the flaky retry test in src/net/retry.ts')
    expect(body.stats.guard_added).toBeGreaterThanOrEqual(3)
  })
})

describe('faults end in the extractive summary', () => {
  const faults: [string, () => void, string, number][] = [
    ['500', () => (fake.fallback = { status: 500 }), 'server_error', 3],
    ['529', () => (fake.fallback = { status: 529, errorType: 'overloaded_error' }), 'overloaded', 3],
    [
      '429 with retry-after',
      () => (fake.fallback = { status: 429, errorType: 'rate_limit_error', headers: { 'retry-after': '1', ...RETRY_AT_ONCE } }),
      'rate_limited',
      3
    ],
    ['a timeout', () => (fake.fallback = { delayMs: TIMEOUT_MS * 3, toolInput: {} }), 'timeout', 1],
    ['text without a tool call', () => (fake.fallback = { text: 'Here is a summary in prose.' }), 'no_tool_call', 2],
    ['invalid tool input', () => (fake.fallback = { toolInput: { files_modified: 'not a list' } }), 'invalid_output', 2],
    ['a refusal', () => (fake.fallback = { toolInput: {}, stopReason: 'refusal' }), 'refusal', 1],
    ['401', () => (fake.fallback = { status: 401, errorType: 'authentication_error' }), 'auth_error', 1],
    ['403', () => (fake.fallback = { status: 403, errorType: 'permission_error' }), 'auth_error', 1],
    ['another 4xx (400)', () => (fake.fallback = { status: 400, errorType: 'invalid_request_error' }), 'bad_request', 1],
    ['413', () => (fake.fallback = { status: 413, errorType: 'request_too_large' }), 'bad_request', 1]
  ]
  it.each(faults)('%s', async (_name, arrange, reason, calls) => {
    arrange()
    const res = await compact({ messages: history, mode: 'manual', keep_turns: 1 })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body.compacted).toBe(true)
    expect(body.summarizer).toMatchObject({ kind: 'extractive', fallback_reason: reason })
    expect(body.summary.text).toContain('src/net/retry.ts')
    // the SDK's retries are the only retry loop for HTTP faults; invalid answers get one retry of ours
    expect(fake.requests).toHaveLength(calls)
  })

  it('retries an invalid answer once, carrying what was wrong, and uses the second answer', async () => {
    fake.reply({ toolInput: { next_steps: 42 } }, { toolInput: { objective: 'second try', key_decisions: ['jitter: full jitter'] } })
    const res = await compact({ messages: history, mode: 'manual', keep_turns: 1 })
    const body = res.json()
    expect(body.summarizer).toMatchObject({ kind: 'anthropic', calls: 2, fallback_reason: null })
    expect(body.summary.sections.key_decisions).toEqual(['jitter: full jitter'])
    const retry = fake.requests[1]!
    expect(retry.body.messages).toHaveLength(3)
    expect(JSON.stringify(retry.body.messages[2])).toContain('/next_steps')
    expect(JSON.stringify(retry.body.messages[2])).toContain('"is_error":true')
  })

  it('answers 502 instead when the operator chose no fallback', async () => {
    const strict = await testApp(env({ COMPACT_FALLBACK: 'error' }))
    fake.fallback = { status: 500 }
    const res = await compact({ messages: history, mode: 'manual', keep_turns: 1 }, strict)
    expect(res.statusCode).toBe(502)
    expect(res.json().error).toMatchObject({ type: 'api_error', message: expect.stringContaining('server_error') })
    await strict.close()
  })
})

describe('chunked folding', () => {
  it('summarizes a history of about 600k tokens in several calls, each under the input budget', async () => {
    const budget = 30_000
    const big = await testApp(env({ COMPACT_SUMMARIZER_INPUT_TOKENS: String(budget), COMPACT_SUMMARIZER_TIMEOUT_MS: '20000' }))
    const messages: Message[] = [user('Port the whole parser to the new AST.')]
    for (let i = 0; i < 240; i++) {
      messages.push(
        ...shellStep(
          `b${i}`,
          `sed -i 's/old/new/' src/parser/part${i}.ts && cat src/parser/part${i}.ts`,
          `// part ${i}\n${'const x = 1 // filler\n'.repeat(450)}`
        )
      )
    }
    messages.push(assistant('All parts ported.'), user('Great, now run the tests.'))
    let n = 0
    fake.fallback = () => ({ toolInput: { objective: 'port the parser', key_decisions: [`chunk ${++n} folded`] } })
    const res = await compact({ messages, mode: 'manual', keep_turns: 1, budget_tokens: 'off' }, big)
    await big.close()
    const body = res.json()
    expect(body.stats.raw_history_tokens).toBeGreaterThan(550_000)
    expect(fake.requests.length).toBeGreaterThanOrEqual(3)
    for (const r of fake.requests) {
      const sent = JSON.stringify({ system: r.body.system, tools: r.body.tools, messages: r.body.messages })
      expect(sent.length / 4).toBeLessThanOrEqual(budget)
    }
    // each chunk after the first updates the summary of the chunks before it
    expect(requestText(fake.requests[1]!)).toContain('The summary so far')
    expect(requestText(fake.requests[1]!)).toContain('chunk 1 folded')
    expect(body.summarizer.calls).toBe(fake.requests.length)
    // every file of the span (step i sits at messages 1+2i and 2+2i) survives the folding
    const spanSteps = Math.floor((body.kept_from - 1) / 2)
    expect(spanSteps).toBeGreaterThan(200)
    for (let i = 0; i < spanSteps; i++) expect(body.summary.text).toContain(`src/parser/part${i}.ts`)
  })
})

describe('secrets', () => {
  it('reach neither the model nor any summary', async () => {
    const planted: Message[] = [
      user(`Deploy with these: ${plantedText()}`),
      assistant(
        `Using ${PLANTED_SECRETS.github_token}`,
        call('x1', 'bash', {
          command: `export TOKEN=${PLANTED_SECRETS.openai_key}; curl -H "Authorization: Bearer ${PLANTED_SECRETS.jwt}" https://deploy:${PLANTED_SECRETS.url_password}@example.com`
        })
      ),
      results(result('x1', plantedText())),
      assistant('Deployed.'),
      user('Thanks, next task.')
    ]
    // a model that repeats a secret it should never have seen
    fake.reply({
      toolInput: { key_decisions: [`used ${PLANTED_SECRETS.aws_access_key}`], user_preferences: [`password=${PLANTED_SECRETS.password_assignment}`] }
    })
    const viaModel = (await compact({ messages: planted, mode: 'manual', keep_turns: 1, instructions: `also note ${PLANTED_SECRETS.slack_token}` })).json()
    const viaExtractive = (await compact({ messages: planted, mode: 'manual', keep_turns: 1, summarizer: 'extractive' })).json()
    expect(fake.requests).toHaveLength(1)
    for (const secret of Object.values(PLANTED_SECRETS)) {
      for (const piece of secret.split('\n').filter((p) => p.length > 12 || p === secret)) {
        expect(fake.requests[0]!.raw).not.toContain(piece)
        expect(JSON.stringify(viaModel.summary)).not.toContain(piece)
        expect(JSON.stringify(viaModel.messages[0])).not.toContain(piece)
        expect(JSON.stringify(viaExtractive.summary)).not.toContain(piece)
      }
    }
    expect(viaModel.summary.text).toContain('[REDACTED')
  })
})

describe('two rounds of compaction', () => {
  it("keep the first round's files and decisions", async () => {
    fake.reply({
      toolInput: {
        objective: 'fix retries',
        key_decisions: ['Use exponential backoff with full jitter'],
        files_modified: ['src/net/retry.ts — fixed off-by-one']
      }
    })
    const first = (await compact({ messages: history, mode: 'manual', keep_turns: 1 })).json()
    expect(first.summary.sections.key_decisions).toContain('Use exponential backoff with full jitter')
    const next: Message[] = [
      ...first.messages,
      assistant(call('w1', 'Write', { file_path: 'src/net/jitter.ts', content: 'x' })),
      results(result('w1', 'ok')),
      assistant('Suite passes.'),
      user('Ship it.')
    ]
    fake.reply({ toolInput: { objective: 'ship' } })
    const second = (await compact({ messages: next, mode: 'manual', keep_turns: 1 })).json()
    const text = second.summary.text as string
    expect(text).toContain('src/net/retry.ts')
    expect(text).toContain('src/net/jitter.ts')
    expect(text).toContain('Use exponential backoff with full jitter')
    expect(text.match(/<compaction-summary/g)).toHaveLength(1)
    // the second call was given the first summary to merge into
    expect(requestText(fake.requests[1]!)).toContain('Use exponential backoff with full jitter')
  })
})
