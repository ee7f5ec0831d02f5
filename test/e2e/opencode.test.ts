import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import { CHAT_RECALL_TOOL_DEFINITION } from '../../src/proxy/recall-tool.js'
import { FakeOpenAi, type FakeOpenAiReply, type OpenAiRequest } from '../helpers/fake-openai.js'
import {
  boundedRun,
  changes,
  crossingFigures,
  expectScriptEnd,
  listedCompactions,
  openAiFixedTokens,
  openAiGateway,
  OTHER_PACES,
  type Pace,
  paceReport,
  runClient,
  summaryTiming,
  writeReport,
  clientFiles
} from '../helpers/e2e.js'
import { type ServerProcess, installedClient, startServer, tempDb } from '../helpers/process.js'

/**
 * The real opencode (from npm, installed by scripts/install-clients.sh into .clients/) runs a scripted
 * session through the gateway's Chat Completions proxy, with an OpenAI-compatible provider whose base URL is
 * the gateway's: it streams every turn with its system prompt and ten tools, names its session in
 * `x-session-id`, asks a title of the same model first, and reads a file in steps with its `read` tool. Its
 * own compaction and pruning are off, so that the gateway is what keeps the history within the budget. The
 * upstream refuses what the Chat Completions API refuses (an unanswered call among them); the summaries come
 * from another model on the same server that takes MODEL_MS each.
 */
export const OPENCODE_VERSION = '1.18.33'
const { bin: BIN, missing } = installedClient(`opencode ${OPENCODE_VERSION}`, `opencode-${OPENCODE_VERSION}`, 'opencode-ai/bin/opencode.exe')

const GATEWAY_KEY = 'gw-e2e-opencode-key-0001'
const UPSTREAM_KEY = 'sk-e2e-opencode-upstream-0000'
const AGENT_MODEL = 'agent-model'
const SUMMARY_MODEL = 'summary-model'
const MODEL_MS = Number(process.env.E2E_MODEL_MS ?? 8_000)
/** How long the agent's model takes over a turn; the summaries are written meanwhile. */
const TURN_MS = Number(process.env.E2E_TURN_MS ?? 1_500)
/** The room between opencode's system prompt and tools and the budget. */
const ROOM = 40_000
const STEPS = 30
/** Lines of the file each step reads: about 4,000 tokens. */
const LINES = 150

const isSummaryCall = (r: OpenAiRequest): boolean => r.body.model === SUMMARY_MODEL
/** A summary call in opencode's own conversation, with its own model (the gateway has no key): a message after opencode's asks for the compaction. */
const isClientSummaryCall = (r: OpenAiRequest): boolean => JSON.stringify(r.body.messages ?? '').includes('<compaction-request>')
const isTitleCall = (r: OpenAiRequest): boolean => !isSummaryCall(r) && !isClientSummaryCall(r) && (r.body.tools ?? []).length === 0
const messagesOf = (r: OpenAiRequest): OpenAiRequest['body']['messages'] => r.body.messages

/** The script: each answer reads the next LINES lines (found from the last call's result), then the end. */
function scripted(
  file: string,
  pace: Pace = { name: 'own', turnMs: TURN_MS, summaryMs: MODEL_MS }
): { reply: (r: OpenAiRequest) => FakeOpenAiReply; handed: Set<number> } {
  const handed = new Set<number>()
  const reply = (r: OpenAiRequest): FakeOpenAiReply => {
    if (isSummaryCall(r)) return { ...summaryTiming(pace), toolInput: { objective: 'Read the build log in steps (SCRIPT-MAIN)' } }
    if (isTitleCall(r)) return { text: 'Reading the build log' }
    const last = messagesOf(r).at(-1)
    const done = last?.role === 'tool' ? Number(/^call_step_(\d+)$/.exec(last.tool_call_id ?? '')?.[1] ?? -1) : -1
    const step = done + 1
    if (step >= STEPS) return { delayMs: pace.turnMs, text: 'SCRIPT-END reached.' }
    handed.add(step)
    const args = JSON.stringify({ filePath: file, offset: step * LINES + 1, limit: LINES })
    return { delayMs: pace.turnMs, toolCalls: [{ id: `call_step_${step}`, name: 'read', arguments: args }] }
  }
  return { reply, handed }
}

/** A work folder with the log the session reads. */
function workFolder(): { work: string; file: string } {
  const work = mkdtempSync(join(tmpdir(), 'cg-e2e-opencode-work-'))
  const file = join(work, 'build.log')
  const lines = Array.from(
    { length: STEPS * LINES + 10 },
    (_, i) => `line ${i} of the build log: compiling module_${i % 97} with -O2 -Wall, ${(i * 7919) % 100_003} symbols resolved`
  )
  writeFileSync(file, `${lines.join('\n')}\n`)
  return { work, file }
}

/** opencode run to its end (`opencode run`) against `baseUrl`, with a home of its own and its provider configured. */
async function runOpencode(
  baseUrl: string,
  work: string,
  home = mkdtempSync(join(tmpdir(), 'cg-e2e-opencode-home-'))
): Promise<{ code: number | null; out: string }> {
  const config = {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      gateway: {
        npm: '@ai-sdk/openai-compatible',
        name: 'gateway',
        options: { baseURL: `${baseUrl}/v1`, apiKey: GATEWAY_KEY },
        models: { [AGENT_MODEL]: { name: AGENT_MODEL } }
      }
    },
    model: `gateway/${AGENT_MODEL}`
  }
  return runClient(BIN, ['run', '--auto', 'Read build.log step by step.'], work, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
    // the gateway keeps the history within the budget: opencode's own compaction and pruning stay off
    OPENCODE_DISABLE_AUTOCOMPACT: '1',
    OPENCODE_DISABLE_PRUNE: '1',
    // nothing beyond loopback is reachable in a test run
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_SHARE: '1'
  })
}

/** opencode run through `gateway` to the scripted end: every step handed out, and every request the upstream was sent taken. */
async function runToScriptEnd(gateway: ServerProcess, fake: FakeOpenAi, script: ReturnType<typeof scripted>, work: string): Promise<void> {
  expectScriptEnd(await runOpencode(gateway.url, work), fake.refused, script.handed.size, STEPS)
}

describe.skipIf(missing !== undefined)(`opencode ${OPENCODE_VERSION} through the gateway's Chat Completions proxy, end to end`, () => {
  const servers: ServerProcess[] = []
  let fixed = 0
  afterAll(() => {
    for (const s of servers) s.child.kill('SIGKILL')
  })

  it('runs the session with compaction off, every request valid, to the scripted end (and measures what its prompt and tools take)', async () => {
    const fake = await new FakeOpenAi().start()
    const { work, file } = workFolder()
    const script = scripted(file)
    fake.fallback = script.reply
    const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, 'off')
    servers.push(gateway)
    await runToScriptEnd(gateway, fake, script, work)
    const agent = fake.requests.filter((r) => !isTitleCall(r))
    expect(agent.every((r) => r.body.stream === true)).toBe(true)
    expect(agent[0]?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`)
    // with compaction off, the history reaches the upstream whole: the last request holds every step
    expect(messagesOf(agent.at(-1) as OpenAiRequest).filter((m) => m.role === 'tool')).toHaveLength(STEPS)
    fixed = openAiFixedTokens(agent[0] as OpenAiRequest, 'chat')
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it('crosses the budget several times with summaries written ahead, every request valid and within the bound, to the scripted end', async () => {
    expect(fixed, 'the first run measured what opencode sends every turn').toBeGreaterThan(0)
    const fake = await new FakeOpenAi().start()
    const { work, file } = workFolder()
    const script = scripted(file)
    fake.fallback = script.reply
    const budget = fixed + ROOM
    const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, { budget, summaryModel: SUMMARY_MODEL })
    servers.push(gateway)
    await runToScriptEnd(gateway, fake, script, work)

    const agent = fake.requests.filter((r) => !isSummaryCall(r) && !isTitleCall(r))
    const { proxied, compactions } = boundedRun(gateway, budget)
    // opencode's system prompt and tools go on as it sent them, every turn (the gateway's recall tool after
    // its own from the first crossing on, in every request after)
    const [first] = agent
    const since = agent.findIndex((r) => (r.body.tools ?? []).some((t) => t.function.name === PROXY_RECALL_TOOL))
    expect(since).toBeGreaterThan(0)
    agent.forEach((r, i) => {
      expect(messagesOf(r)[0]).toEqual(messagesOf(first as OpenAiRequest)[0])
      expect(r.body.tools).toEqual(i < since ? first?.body.tools : [...(first?.body.tools ?? []), CHAT_RECALL_TOOL_DEFINITION])
    })
    // Once compacted, the last request holds the summary and not every step; its newest steps are there as opencode sent them.
    const last = messagesOf(agent.at(-1) as OpenAiRequest)
    expect(last.filter((m) => m.role === 'tool').length).toBeLessThan(STEPS)
    expect(JSON.stringify(last)).toContain('SCRIPT-MAIN')
    expect(last.at(-1)).toMatchObject({ role: 'tool', tool_call_id: `call_step_${STEPS - 1}` })
    // Between two compactions the summary message is the same, byte for byte: the upstream's prompt cache holds.
    const summaryChanges = changes(agent.map((r) => messagesOf(r)[1]))
    expect(summaryChanges).toBeLessThanOrEqual(compactions.length)
    // The compactions are kept under the session opencode names in its x-session-id header.
    const session = agent[0]?.headers['x-session-id'] as string
    expect(session).toMatch(/./)
    expect(await listedCompactions(gateway.url, session, GATEWAY_KEY)).toBe(compactions.length)

    writeReport('opencode', {
      client: `opencode ${OPENCODE_VERSION}`,
      budget,
      fixed_tokens: fixed,
      model_ms: MODEL_MS,
      requests: agent.length,
      summary_calls: fake.requests.filter(isSummaryCall).length,
      ...crossingFigures(proxied, compactions, MODEL_MS),
      summary_message_changes: summaryChanges
    })
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it("lets its model get back a line the compactions removed: the gateway's recall tool called, answered, the value used; its session holds no call of it", async () => {
    expect(fixed, 'the first run measured what opencode sends every turn').toBeGreaterThan(0)
    const fake = await new FakeOpenAi().start()
    const { work, file } = workFolder()
    // the log's first lines hold the line the task needs at the end
    writeFileSync(file, `INFO the rollout codename is bluefin-7\n${readFileSync(file, 'utf8')}`)
    const script = scripted(file)
    const recallResult = (r: OpenAiRequest): string | undefined => {
      const last = messagesOf(r).at(-1)
      return last?.role === 'tool' && last.tool_call_id === 'call_recall_e2e' ? String(last.content) : undefined
    }
    let askedWithout: boolean | undefined
    fake.fallback = (r) => {
      const found = recallResult(r)
      if (found !== undefined) return { text: `SCRIPT-END reached. The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.` }
      const reply = script.reply(r)
      if (reply.text === 'SCRIPT-END reached.' && (r.body.tools ?? []).some((t) => t.function.name === PROXY_RECALL_TOOL)) {
        askedWithout = !JSON.stringify(r.body.messages).includes('bluefin-7')
        return { toolCalls: [{ id: 'call_recall_e2e', name: PROXY_RECALL_TOOL, arguments: JSON.stringify({ query: 'rollout codename' }) }] }
      }
      return reply
    }
    const budget = fixed + ROOM
    const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, { budget, summaryModel: SUMMARY_MODEL })
    servers.push(gateway)
    const home = mkdtempSync(join(tmpdir(), 'cg-e2e-opencode-home-'))
    const { code, out } = await runOpencode(gateway.url, work, home)
    expect(code, out).toBe(0)
    expect(fake.refused).toEqual([])
    expect(askedWithout, 'the line was compacted out of the prompt before the model asked').toBe(true)
    expect(out).toContain('The codename is bluefin-7.')
    // opencode's own record of the session: the answer, and no call of the gateway's tool
    const stored = clientFiles(home)
    expect(stored).toContain('bluefin-7')
    expect(stored).not.toContain(PROXY_RECALL_TOOL)
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it("writes its summaries with opencode's own model and key where the gateway has none, reading opencode's prefix from the upstream's cache", async () => {
    expect(fixed, 'the first run measured what opencode sends every turn').toBeGreaterThan(0)
    const fake = await new FakeOpenAi().start()
    const { work, file } = workFolder()
    const script = scripted(file)
    const summaryAnswer = JSON.stringify({ objective: 'Read the build log in steps (SCRIPT-MAIN)', next_steps: ['Read the next lines'] })
    fake.fallback = (r) => (isClientSummaryCall(r) ? { delayMs: MODEL_MS, text: summaryAnswer } : script.reply(r))
    const budget = fixed + ROOM
    // no key of the gateway's, none of its own checks: opencode's key goes upstream, and writes the summaries
    const gateway = await startServer({ OPENAI_BASE_URL: `${fake.url}/v1`, COMPACT_DB: tempDb(), COMPACT_BUDGET: String(budget) })
    servers.push(gateway)
    await runToScriptEnd(gateway, fake, script, work)
    const calls = fake.requests.filter(isClientSummaryCall)
    expect(calls.length).toBeGreaterThanOrEqual(1)
    for (const c of calls) {
      expect(c.headers.authorization).toBe(`Bearer ${GATEWAY_KEY}`)
      expect(c.body.model).toBe(AGENT_MODEL)
    }
    // (at this pace a summary of 8 s is ready one crossing late, as with a model of the gateway's: the
    // crossings merge, and the next one carries what the client's model wrote)
    const run = boundedRun(gateway, budget)
    const last = messagesOf(fake.requests.filter((r) => !isClientSummaryCall(r) && !isTitleCall(r)).at(-1) as OpenAiRequest)
    expect(JSON.stringify(last)).toContain('SCRIPT-MAIN')
    const tokens = calls.reduce((n, r) => n + (r.cache?.prompt ?? 0), 0)
    const cached = calls.reduce((n, r) => n + (r.cache?.cached ?? 0), 0)
    writeReport('opencode-client-model', {
      client: `opencode ${OPENCODE_VERSION}`,
      budget,
      summary_calls: calls.length,
      compactions: run.compactions.length,
      sources: run.compactions.map((c) => c.source),
      summary_input_tokens: tokens,
      summary_cache_read_share: cached / Math.max(1, tokens)
    })
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it.each(OTHER_PACES)(
    'runs to the scripted end at another pace ($name): every request valid, every crossing forwarded with what was at hand',
    async (pace) => {
      expect(fixed, 'the first run measured what opencode sends every turn').toBeGreaterThan(0)
      const fake = await new FakeOpenAi().start()
      const { work, file } = workFolder()
      const script = scripted(file, pace)
      fake.fallback = script.reply
      const budget = fixed + ROOM
      const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, { budget, summaryModel: SUMMARY_MODEL })
      servers.push(gateway)
      await runToScriptEnd(gateway, fake, script, work)
      paceReport('opencode', pace, boundedRun(gateway, budget), fake.requests.filter(isSummaryCall).length)
      gateway.child.kill('SIGTERM')
      await fake.close()
    },
    600_000
  )
})
