import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CLEARED_MARK, PROXY_RECALL_TOOL, promptTokens } from '../../src/compaction/index.js'
import { FakeAnthropic, type ReceivedRequest } from '../helpers/fake-anthropic.js'
import { OTHER_PACES, boundedRun, crossingFigures, paceReport, runClient, summaryTiming, writeReport } from '../helpers/e2e.js'
import { ROOT, type ServerProcess, installedClient, logLines, startServer, tempDb } from '../helpers/process.js'
import { ScriptedAgent } from '../helpers/scripted-agent.js'
import { REDIS_URL, dropSchemas, freshPgUrl, pgMissing, redisMissing } from '../helpers/services.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

/**
 * The real Claude Code (from npm, installed by scripts/install-clients.sh into .clients/) runs a scripted
 * session through the gateway with its default model: tool turns that cross the budget several times, a
 * subagent in the middle, the gateway's replica switched under it (a second process on the same
 * PostgreSQL and Redis) and then restarted. The upstream refuses what the Messages API refuses and
 * answers as the script says; the summaries take MODEL_MS each, as a real model's would.
 */
export const CLAUDE_CODE_VERSION = '2.1.332'
const { bin: BIN, missing } = installedClient(
  `Claude Code ${CLAUDE_CODE_VERSION}`,
  `claude-code-${CLAUDE_CODE_VERSION}`,
  '@anthropic-ai/claude-code/bin/claude.exe'
)

const GATEWAY_KEY = 'gw-e2e-claude-code-key-0001'
const UPSTREAM_KEY = 'sk-ant-e2e-upstream-000000000000'
const MODEL_MS = Number(process.env.E2E_MODEL_MS ?? 8_000)
/** How long the agent's model takes over a turn (a real one takes seconds); the summaries are written meanwhile. */
const TURN_MS = Number(process.env.E2E_TURN_MS ?? 1_500)
/** The room between Claude Code's system prompt and tools and the budget. */
const ROOM = 60_000
const STEPS = 56
/** The line an early step prints that the model needs at the end (the recall test). */
const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'
const SUBAGENT_AT = 24
const SWITCH_AT = 32
const RESTART_AT = 44

const firstMessage = (r: ReceivedRequest): string => JSON.stringify(r.body.messages[0] ?? null)
const isSummaryCall = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === 'record_summary')
/** A summary call in Claude Code's own conversation (the gateway without a model of its own): its last block asks for the compaction. */
const isClientSummaryCall = (r: ReceivedRequest): boolean => JSON.stringify(r.body.messages.at(-1) ?? null).includes('<compaction-request>')

/** Claude Code's own system prompt and tools, as it sends them (a recorded body): the budget is set above them. */
function fixedTokens(): number {
  const body = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/claude-code/2.1.332-first.json'), 'utf8')) as { system: string; tools: unknown[] }
  return promptTokens([], body.system, body.tools)
}

/** The session's script: STEPS shell steps of about 4,000 tokens of output each, the subagent at SUBAGENT_AT. */
function scriptedAgent(): ScriptedAgent {
  const main = Array.from({ length: STEPS }, (_, i) =>
    i === SUBAGENT_AT
      ? {
          tool: 'Agent',
          input: {
            description: 'Count the callers',
            prompt: 'SUBAGENT-TASK: run the two scripted steps, then report.',
            subagent_type: 'general-purpose',
            run_in_background: false
          }
        }
      : { tool: 'Bash', input: { command: `seq 1 700 | sed 's/^/step ${i} output line /'`, description: `Print step ${i}` } }
  )
  const sub = [0, 1].map((i) => ({ tool: 'Bash', input: { command: `echo subagent step ${i}`, description: `Subagent step ${i}` } }))
  return new ScriptedAgent([
    // the subagent's conversation opens with the task it was given; the main one with the user's prompt (or its summary)
    {
      name: 'sub',
      match: (r) => firstMessage(r).includes('SUBAGENT-TASK') && !firstMessage(r).includes('<compaction-summary'),
      steps: sub,
      final: 'SUBAGENT-DONE: two steps run.'
    },
    { name: 'main', match: () => true, steps: main, final: 'SCRIPT-END reached.' }
  ])
}

/** Claude Code run to its end in print mode against `baseUrl`, with a home (`home`, else one of its own) and a work folder of its own. */
async function runClaudeCode(baseUrl: string, home = mkdtempSync(join(tmpdir(), 'cg-e2e-home-'))): Promise<{ code: number | null; out: string }> {
  const work = mkdtempSync(join(tmpdir(), 'cg-e2e-work-'))
  mkdirSync(join(home, '.claude'), { recursive: true })
  return runClient(BIN, ['-p', 'Run the scripted steps one by one.', '--allowedTools', 'Bash,Agent'], work, {
    HOME: home,
    ANTHROPIC_BASE_URL: baseUrl,
    ANTHROPIC_API_KEY: GATEWAY_KEY,
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1'
  })
}

/**
 * The requests that sent thinking blocks back: the fake binds each to its prefix where the model has preserved
 * thinking (Claude Code's default model does) and refuses a changed one, so these were checked.
 */
function thinkingSentBack(fake: FakeAnthropic): number {
  return fake.requests.filter((r) => r.body.messages.some((m) => Array.isArray(m.content) && m.content.some((b: { type?: string }) => b.type === 'thinking')))
    .length
}

/** The share of the main conversation's prompt tokens the upstream read from its cache. */
function cacheShare(requests: ReceivedRequest[]): number {
  const main = requests.filter((r) => !isSummaryCall(r) && r.cache)
  const tokens = main.reduce((n, r) => n + (r.cache?.tokens ?? 0), 0)
  return main.reduce((n, r) => n + (r.cache?.read ?? 0), 0) / Math.max(1, tokens)
}

describe.skipIf(missing !== undefined)(`Claude Code ${CLAUDE_CODE_VERSION} through the gateway, end to end`, () => {
  /** The same session with compaction off, for the cache comparison. */
  let uncompacted: { cache_read_share: number; last_prompt_tokens: number } | undefined
  const shared = pgMissing === undefined
  const servers: ServerProcess[] = []
  afterAll(async () => {
    for (const s of servers) s.child.kill('SIGKILL')
    if (shared) await dropSchemas()
  })

  it('runs the same session with compaction off, every request valid, to the scripted end (the baseline of the cache share)', async () => {
    const fake = await new FakeAnthropic().start()
    const agent = scriptedAgent()
    fake.fallback = (r) => ({ ...agent.reply(r), delayMs: TURN_MS })
    const gateway = await startServer({
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
      COMPACT_BUDGET: 'off'
    })
    servers.push(gateway)
    const { code, out } = await runClaudeCode(gateway.url)
    expect(code, out).toBe(0)
    expect(out).toContain('SCRIPT-END reached.')
    expect(fake.refused).toEqual([])
    expect(thinkingSentBack(fake), 'Claude Code sends its thinking back, checked against its prefix').toBeGreaterThan(0)
    const main = fake.requests.filter((r) => firstMessage(r).includes('Run the scripted steps'))
    uncompacted = { cache_read_share: cacheShare(fake.requests), last_prompt_tokens: main.at(-1)?.cache?.tokens ?? 0 }
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it('crosses the budget several times, runs a subagent, survives a replica switch and a restart, every request valid, to the scripted end', async () => {
    const fake = await new FakeAnthropic().start()
    const agent = scriptedAgent()
    // The step at which the gateway restarts is answered once the new process takes the connection.
    let restart: Promise<void> | undefined
    fake.fallback = (r) => {
      if (isSummaryCall(r)) return { delayMs: MODEL_MS, toolInput: { objective: 'Run the scripted steps (SCRIPT-MAIN)' } }
      const reply = { ...agent.reply(r), delayMs: TURN_MS }
      return restart ? { ...reply, after: restart } : reply
    }

    const db = shared ? freshPgUrl() : tempDb()
    const budget = fixedTokens() + ROOM
    const env = {
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      // the gateway's own model writes the summaries (its summary tool), at every pace
      COMPACT_PROXY_SUMMARIES: 'gateway',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
      COMPACT_DB: db,
      COMPACT_BUDGET: String(budget),
      ...(redisMissing === undefined ? { COMPACT_REDIS_URL: REDIS_URL } : {})
    }
    const start = async (): Promise<ServerProcess> => {
      const s = await startServer(env)
      servers.push(s)
      return s
    }
    const a = await start()
    const b = shared ? await start() : undefined
    const port = (s: ServerProcess): number => Number(new URL(s.url).port)
    const relay = await new TcpProxy('127.0.0.1', port(a)).up()

    // Mid-session: the load balancer moves the client to the other replica, then the first one restarts.
    const moves: Promise<void>[] = []
    let restarted: ServerProcess | undefined
    let restarting = false
    // Each move happens once: it cuts the connection the client's request is on, and the client retries.
    let switched = false
    agent.onStep = (script, step) => {
      if (script !== 'main') return
      if (step === SWITCH_AT && b && !switched) {
        switched = true
        relay.retarget(port(b))
      }
      if (step === RESTART_AT && !restarting) {
        restarting = true
        restart = (async () => {
          a.child.kill('SIGTERM')
          await a.exited
          restarted = await start()
          relay.retarget(port(restarted))
        })()
        moves.push(restart)
        void restart.finally(() => (restart = undefined))
      }
    }

    const { code, out } = await runClaudeCode(`http://127.0.0.1:${relay.port}`)
    await Promise.all(moves)
    if (process.env.E2E_DEBUG) {
      const t0 = fake.requests[0]?.at ?? 0
      for (const r of fake.requests)
        console.log(Math.round((r.at ?? 0) - t0), isSummaryCall(r) ? 'SUMMARY' : firstMessage(r).slice(0, 60), r.body.messages.length, r.raw.length)
      servers.forEach((s, k) =>
        console.log(
          `--- server ${k}`,
          JSON.stringify(
            logLines(s)
              .filter((e) => e.event === 'proxied' || e.event === 'context_compacted')
              .map((e) => [e.event?.[0], e.compaction, e.source, e.summary_id?.slice(4, 10), e.prepare_ms])
          )
        )
      )
    }

    // The scripted end was reached, and the upstream took every request it was sent.
    expect(code, out).toBe(0)
    expect(out).toContain('SCRIPT-END reached.')
    expect(fake.refused).toEqual([])
    expect(thinkingSentBack(fake), 'Claude Code sends its thinking back, checked against its prefix').toBeGreaterThan(0)
    expect(agent.finished.get('sub')).toBeGreaterThanOrEqual(1)
    const mainSteps = new Set(agent.handed.filter(([s]) => s === 'main').map(([, n]) => n))
    expect(mainSteps.size).toBe(STEPS)

    // Every process's own account of what it forwarded.
    const processes = [a, ...(b ? [b] : []), ...(restarted ? [restarted] : [])]
    const proxied = processes.map((p) => logLines(p).filter((e) => e.event === 'proxied'))
    const compactions = processes.flatMap((p) => logLines(p).filter((e) => e.event === 'context_compacted'))
    expect(compactions.length).toBeGreaterThanOrEqual(3)
    expect(proxied.flat().every((e) => e.status === 200)).toBe(true)
    // A replica that takes the conversation over, and the restarted process, go on with the summary it had:
    // their first answer reuses it (no model call, the same summary turn), or is a precomputed crossing.
    for (const later of proxied.slice(1)) {
      const first = later.find((e) => e.compaction !== 'none')
      expect(first, 'a later process forwarded the conversation').toBeDefined()
      expect(first?.compaction === 'reused' || compactions.some((c) => c.summary_id === first?.summary_id && c.source !== 'model')).toBe(true)
    }

    // Compactions spaced by design: at most one more than the history grew by half the room.
    const forwarded = fake.requests.filter((r) => !isSummaryCall(r))
    const growth = forwarded
      .map((r, i) => (r.cache?.tokens ?? 0) - (forwarded[i - 1]?.cache?.tokens ?? Infinity))
      .filter((d) => d > 0)
      .sort((x, y) => x - y)
    const perStep = growth[Math.floor(growth.length / 2)] ?? 0
    const grown = perStep * (STEPS - 1)
    expect(compactions.length).toBeLessThanOrEqual(1 + grown / (ROOM / 2))

    // The figures, for the README: the crossings' waits against the model's time, compactions against growth.
    writeReport('claude-code', {
      client: `claude-code ${CLAUDE_CODE_VERSION}`,
      store: shared ? 'postgresql' : 'sqlite',
      redis: redisMissing === undefined,
      budget,
      model_ms: MODEL_MS,
      requests: forwarded.length,
      summary_calls: fake.requests.length - forwarded.length,
      ...crossingFigures(proxied.flat(), compactions, MODEL_MS),
      history_grew_tokens: grown,
      compactions_bound: 1 + grown / (ROOM / 2),
      cache_read_share: cacheShare(fake.requests),
      uncompacted
    })
    await relay.down()
    await fake.close()
  }, 600_000)

  it("writes its summaries with Claude Code's own model and key where the gateway has none, reading Claude Code's prefix from the cache", async () => {
    const fake = await new FakeAnthropic().start()
    const agent = scriptedAgent()
    const summaryAnswer = JSON.stringify({ objective: 'Run the scripted steps (SCRIPT-MAIN)', next_steps: ['Run the next scripted step'] })
    fake.fallback = (r) => (isClientSummaryCall(r) ? { delayMs: MODEL_MS, text: summaryAnswer } : { ...agent.reply(r), delayMs: TURN_MS })
    const budget = fixedTokens() + ROOM
    // no key of the gateway's, none of its own checks: Claude Code's key goes upstream, and writes the summaries
    const gateway = await startServer({ ANTHROPIC_BASE_URL: fake.url, COMPACT_DB: tempDb(), COMPACT_BUDGET: String(budget) })
    servers.push(gateway)
    const { code, out } = await runClaudeCode(gateway.url)
    expect(code, out).toBe(0)
    expect(out).toContain('SCRIPT-END reached.')
    expect(fake.refused).toEqual([])
    expect(thinkingSentBack(fake), 'Claude Code sends its thinking back, checked against its prefix').toBeGreaterThan(0)
    const calls = fake.requests.filter(isClientSummaryCall)
    expect(calls.length).toBeGreaterThanOrEqual(1)
    for (const c of calls) expect(c.headers['x-api-key'] ?? c.headers.authorization).toContain(GATEWAY_KEY)
    const run = boundedRun(gateway, budget)
    expect(run.compactions.some((c) => c.source === 'precomputed')).toBe(true)
    // what the summary calls cost, their input billed as the API bills it (writes 1.25x, reads 0.1x)
    const billed = (rs: ReceivedRequest[]): number =>
      rs.reduce((n, r) => n + (r.cache ? r.cache.tokens - r.cache.read - r.cache.written + 1.25 * r.cache.written + 0.1 * r.cache.read : 0), 0)
    const tokens = calls.reduce((n, r) => n + (r.cache?.tokens ?? 0), 0)
    writeReport('claude-code-client-model', {
      client: `claude-code ${CLAUDE_CODE_VERSION}`,
      budget,
      summary_calls: calls.length,
      compactions: run.compactions.length,
      sources: run.compactions.map((c) => c.source),
      summary_input_tokens: tokens,
      summary_cache_read_share: calls.reduce((n, r) => n + (r.cache?.read ?? 0), 0) / Math.max(1, tokens),
      summary_billed_input_per_call: billed(calls) / calls.length
    })
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it("lets its model get back a line the compaction removed: the gateway's recall tool called, answered, the value used; the transcript holds no recall call", async () => {
    const fake = await new FakeAnthropic().start()
    // an early step prints the line the task needs at the end, among hundreds of others
    const steps = Array.from({ length: 30 }, (_, i) => ({
      tool: 'Bash',
      input: {
        command: i === 1 ? `seq 1 300 | sed 's/^/deploy log line /'; echo '${CODENAME_LINE}'` : `seq 1 700 | sed 's/^/step ${i} output line /'`,
        description: `Print step ${i}`
      }
    }))
    const agent = new ScriptedAgent([{ name: 'main', match: () => true, steps, final: 'SCRIPT-END reached.' }])
    const offered = (r: ReceivedRequest): boolean => (r.body.tools ?? []).some((t) => t.name === PROXY_RECALL_TOOL)
    const recallResult = (r: ReceivedRequest): string | undefined => {
      const last = r.body.messages.at(-1)?.content
      const found = Array.isArray(last)
        ? last.find((b: { type?: string; tool_use_id?: string }) => b.type === 'tool_result' && b.tool_use_id === 'toolu_recall_e2e')
        : undefined
      return found === undefined ? undefined : JSON.stringify(found)
    }
    let askedWithout: boolean | undefined
    fake.fallback = (r) => {
      if (isSummaryCall(r)) return { toolInput: { objective: 'Run the scripted steps (SCRIPT-MAIN)' } }
      const found = recallResult(r)
      if (found !== undefined)
        return { content: [{ type: 'text', text: `SCRIPT-END reached. The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.` }] }
      const reply = agent.reply(r)
      if (reply.content?.[0]?.type === 'text' && offered(r)) {
        // the script is done: the model needs the codename, which the compactions took out of its prompt
        askedWithout = !r.raw.includes('bluefin-7')
        return { content: [{ type: 'tool_use', id: 'toolu_recall_e2e', name: PROXY_RECALL_TOOL, input: { query: 'rollout codename' } }], delayMs: TURN_MS }
      }
      return { ...reply, delayMs: TURN_MS }
    }
    const gateway = await startServer({
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      // the gateway's own model writes the summaries (its summary tool), at every pace
      COMPACT_PROXY_SUMMARIES: 'gateway',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
      COMPACT_DB: tempDb(),
      COMPACT_BUDGET: String(fixedTokens() + ROOM)
    })
    servers.push(gateway)
    const home = mkdtempSync(join(tmpdir(), 'cg-e2e-home-'))
    const { code, out } = await runClaudeCode(gateway.url, home)
    expect(code, out).toBe(0)
    expect(fake.refused).toEqual([])
    expect(askedWithout, 'the line was compacted out of the prompt before the model asked').toBe(true)
    expect(out).toContain('SCRIPT-END reached. The codename is bluefin-7.')
    // Claude Code's own record of the session: the answer, and no call or result of the gateway's tool
    const transcripts = readdirSync(join(home, '.claude'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.jsonl'))
    expect(transcripts.length).toBeGreaterThan(0)
    const text = transcripts.map((f) => readFileSync(join(home, '.claude', f), 'utf8')).join('\n')
    expect(text).toContain('The codename is bluefin-7.')
    expect(text).not.toContain(PROXY_RECALL_TOOL)
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it('runs to the scripted end with clearing first (COMPACT_STRATEGY=hybrid): old tool results cleared at the crossings, every request valid and within the budget', async () => {
    const fake = await new FakeAnthropic().start()
    const agent = scriptedAgent()
    fake.fallback = (r) => (isSummaryCall(r) ? { toolInput: { objective: 'Run the scripted steps (SCRIPT-MAIN)' } } : { ...agent.reply(r), delayMs: TURN_MS })
    const budget = fixedTokens() + ROOM
    const gateway = await startServer({
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      // the gateway's own model writes the summaries (its summary tool), at every pace
      COMPACT_PROXY_SUMMARIES: 'gateway',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
      COMPACT_DB: tempDb(),
      COMPACT_BUDGET: String(budget),
      COMPACT_STRATEGY: 'hybrid'
    })
    servers.push(gateway)
    const { code, out } = await runClaudeCode(gateway.url)
    expect(code, out).toBe(0)
    expect(out).toContain('SCRIPT-END reached.')
    expect(fake.refused).toEqual([])
    expect(thinkingSentBack(fake), 'Claude Code sends its thinking back, checked against its prefix').toBeGreaterThan(0)
    const main = fake.requests.filter((r) => !isSummaryCall(r))
    const cleared = main.filter((r) => r.raw.includes(CLEARED_MARK.slice(1)))
    expect(cleared.length).toBeGreaterThan(0)
    for (const r of main) expect(promptTokens(r.body.messages as never, r.body.system as never, r.body.tools as never)).toBeLessThanOrEqual(budget)
    writeReport('claude-code-clearing', {
      client: `claude-code ${CLAUDE_CODE_VERSION}`,
      budget,
      requests: main.length,
      requests_with_cleared_results: cleared.length,
      summary_calls: fake.requests.filter(isSummaryCall).length,
      cache_read_share: cacheShare(fake.requests),
      uncompacted_cache_read_share: uncompacted?.cache_read_share ?? null
    })
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it.each(OTHER_PACES)(
    'runs to the scripted end at another pace ($name): every request valid, every crossing forwarded with what was at hand',
    async (pace) => {
      const fake = await new FakeAnthropic().start()
      const agent = scriptedAgent()
      fake.fallback = (r) =>
        isSummaryCall(r)
          ? { ...summaryTiming(pace), toolInput: { objective: 'Run the scripted steps (SCRIPT-MAIN)' } }
          : { ...agent.reply(r), delayMs: pace.turnMs }
      const budget = fixedTokens() + ROOM
      const gateway = await startServer({
        ANTHROPIC_API_KEY: UPSTREAM_KEY,
        // the gateway's own model writes the summaries (its summary tool), at every pace
        COMPACT_PROXY_SUMMARIES: 'gateway',
        ANTHROPIC_BASE_URL: fake.url,
        COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
        COMPACT_DB: tempDb(),
        COMPACT_BUDGET: String(budget)
      })
      servers.push(gateway)
      const { code, out } = await runClaudeCode(gateway.url)
      expect(code, out).toBe(0)
      expect(out).toContain('SCRIPT-END reached.')
      expect(fake.refused).toEqual([])
      expect(thinkingSentBack(fake)).toBeGreaterThan(0)
      expect(thinkingSentBack(fake), 'Claude Code sends its thinking back, checked against its prefix').toBeGreaterThan(0)
      const run = boundedRun(gateway, budget)
      paceReport('claude-code', pace, run, fake.requests.filter(isSummaryCall).length)
      gateway.child.kill('SIGTERM')
      await fake.close()
    },
    600_000
  )
})

/**
 * Claude Code's tool search behind a base URL: users of other gateways report that from 2.1.70 it is off where
 * ANTHROPIC_BASE_URL points elsewhere unless ENABLE_TOOL_SEARCH=true, putting every MCP tool's schema in every
 * request. The real Claude Code, with an MCP server of 60 tools, through the gateway: what its first request
 * holds by default, with ENABLE_TOOL_SEARCH=true and with it false.
 */
const SEARCH_GATEWAY_KEY = 'gw-e2e-tool-search-key-0001'
const MCP_TOOLS = 60

interface Sent {
  bytes: number
  tools: number
  mcp_tools: number
  tool_search: boolean
}

/** The first request of Claude Code's main conversation, as the upstream received it through the gateway. */
async function firstRequest(gateway: ServerProcess, fake: FakeAnthropic, env: Record<string, string>): Promise<Sent> {
  const home = mkdtempSync(join(tmpdir(), 'cg-e2e-home-'))
  const work = mkdtempSync(join(tmpdir(), 'cg-e2e-work-'))
  mkdirSync(join(home, '.claude'), { recursive: true })
  const config = join(home, 'mcp.json')
  writeFileSync(
    config,
    JSON.stringify({ mcpServers: { tracker: { type: 'stdio', command: process.execPath, args: [join(ROOT, 'test/fixtures/mcp/many-tools.mjs')] } } })
  )
  const before = fake.requests.length
  const { code, out } = await runClient(BIN, ['-p', 'Say done.', '--mcp-config', config], work, {
    HOME: home,
    ANTHROPIC_BASE_URL: gateway.url,
    ANTHROPIC_API_KEY: SEARCH_GATEWAY_KEY,
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ...env
  })
  expect(code, out).toBe(0)
  const main = fake.requests.slice(before).find((r: ReceivedRequest) => r.path.startsWith('/v1/messages') && !r.path.includes('count_tokens'))
  expect(main, 'Claude Code sent its request through the gateway').toBeDefined()
  const tools = (main?.body.tools ?? []) as { name?: string }[]
  return {
    bytes: main?.raw.length ?? 0,
    tools: tools.length,
    mcp_tools: tools.filter((t) => t.name?.startsWith('mcp__')).length,
    tool_search: tools.some((t) => t.name === 'ToolSearch')
  }
}

describe.skipIf(missing !== undefined)(`Claude Code ${CLAUDE_CODE_VERSION}'s tool search through the gateway`, () => {
  const servers: ServerProcess[] = []
  const fakes: FakeAnthropic[] = []
  afterAll(async () => {
    for (const s of servers) s.child.kill('SIGKILL')
    for (const f of fakes) await f.close()
  })

  it('keeps its tool search on behind the base URL by default: its MCP tools are found on demand, not sent in every request', async () => {
    const fake = await new FakeAnthropic().start()
    fakes.push(fake)
    fake.fallback = { content: [{ type: 'text', text: 'done' }] }
    const gateway = await startServer({
      ANTHROPIC_API_KEY: 'sk-ant-e2e-upstream-000000000000',
      ANTHROPIC_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${SEARCH_GATEWAY_KEY}`
    })
    servers.push(gateway)
    const unset = await firstRequest(gateway, fake, {})
    const on = await firstRequest(gateway, fake, { ENABLE_TOOL_SEARCH: 'true' })
    const off = await firstRequest(gateway, fake, { ENABLE_TOOL_SEARCH: 'false' })
    writeReport('claude-code-tool-search', {
      client: `claude-code ${CLAUDE_CODE_VERSION}`,
      mcp_tools_offered: MCP_TOOLS,
      unset,
      on,
      off,
      off_vs_unset_bytes: off.bytes / unset.bytes
    })
    // unset: as with the setting on, the tool search and none of the MCP server's schemas
    expect(unset.tool_search).toBe(true)
    expect(unset.mcp_tools).toBe(0)
    expect(on).toEqual(unset)
    // off: every one of the MCP server's tools in the request, several times its size
    expect(off.tool_search).toBe(false)
    expect(off.mcp_tools).toBe(MCP_TOOLS)
    expect(off.bytes).toBeGreaterThan(2 * unset.bytes)
  }, 300_000)
})
