import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
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
import { type ServerProcess, installedClient } from '../helpers/process.js'

/**
 * The real Codex CLI (from npm, installed by scripts/install-clients.sh into .clients/) runs a scripted
 * session through the gateway's Responses proxy with its default model: it streams every turn, sends
 * `store: false` with the whole history, its tools as an `additional_tools` item and its instructions as
 * developer items, names its session in `session-id`, and gets reasoning and `custom_tool_call` items back.
 * The upstream refuses what the Responses API refuses; the summaries come from an OpenAI-compatible model
 * (Chat Completions on the same loopback server) that takes MODEL_MS each.
 */
export const CODEX_VERSION = '0.171.0'
const { bin: BIN, missing } = installedClient(`Codex CLI ${CODEX_VERSION}`, `codex-${CODEX_VERSION}`, '@openai/codex/bin/codex.js')

const GATEWAY_KEY = 'gw-e2e-codex-key-0001'
const UPSTREAM_KEY = 'sk-e2e-openai-upstream-0000'
const MODEL_MS = Number(process.env.E2E_MODEL_MS ?? 8_000)
/** How long the agent's model takes over a turn (a real one takes seconds); the summaries are written meanwhile. */
const TURN_MS = Number(process.env.E2E_TURN_MS ?? 1_500)
/** The room between Codex's tools and instructions and the budget. */
const ROOM = 40_000
const STEPS = 36
/** Each step's output: about 4,000 tokens of text, made by the exec tool's own JavaScript (no shell needed). */
const OUTPUT_LINES = 230

const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'
const isSummaryCall = (r: OpenAiRequest): boolean => r.path === '/v1/chat/completions'
type Item = Record<string, unknown>
const inputOf = (r: OpenAiRequest): Item[] => (Array.isArray(r.body.input) ? (r.body.input as Item[]) : [])

/**
 * The script: each answer is the next step (reasoning, then an exec call), found from the last call's output;
 * then the end. With `codename`, the first step's output opens with the line the end needs.
 */
function scripted(
  pace: Pace = { name: 'own', turnMs: TURN_MS, summaryMs: MODEL_MS },
  codename = false
): { reply: (r: OpenAiRequest) => FakeOpenAiReply; handed: Set<number> } {
  const handed = new Set<number>()
  const reply = (r: OpenAiRequest): FakeOpenAiReply => {
    if (isSummaryCall(r)) return { ...summaryTiming(pace), toolInput: { objective: 'Run the scripted steps (SCRIPT-MAIN)' } }
    const last = inputOf(r).at(-1)
    const done = typeof last?.call_id === 'string' ? Number(/^call_step_(\d+)$/.exec(last.call_id)?.[1] ?? -1) : -1
    const step = done + 1
    if (step >= STEPS)
      return {
        delayMs: pace.turnMs,
        output: [
          {
            type: 'message',
            id: `msg_end_${step}`,
            status: 'completed',
            role: 'assistant',
            content: [{ type: 'output_text', text: 'SCRIPT-END reached.', annotations: [] }]
          }
        ]
      }
    handed.add(step)
    const opening = codename && step === 0 ? `${CODENAME_LINE}\\n` : ''
    const code = `text("${opening}step ${step} output\\n" + Array.from({ length: ${OUTPUT_LINES} }, (_, i) => "step ${step} line " + i + " of the build log, with some words to read").join("\\n"))`
    return {
      delayMs: pace.turnMs,
      output: [
        { type: 'reasoning', id: `rs_step_${step}`, summary: [], encrypted_content: `gAAAAB${'r'.repeat(300)}${step}` },
        { type: 'custom_tool_call', id: `ctc_step_${step}`, status: 'completed', call_id: `call_step_${step}`, name: 'exec', input: code }
      ]
    }
  }
  return { reply, handed }
}

/** Codex run to its end (`codex exec`) against `baseUrl`, with a home and a work folder of its own. */
async function runCodex(baseUrl: string, home = mkdtempSync(join(tmpdir(), 'cg-e2e-codex-home-'))): Promise<{ code: number | null; out: string }> {
  const work = mkdtempSync(join(tmpdir(), 'cg-e2e-codex-work-'))
  const provider = `{ name = "gateway", base_url = "${baseUrl}/v1", env_key = "GATEWAY_KEY", wire_api = "responses" }`
  return runClient(
    process.execPath,
    [BIN, 'exec', '--skip-git-repo-check', '-c', 'model_provider="gateway"', '-c', `model_providers.gateway=${provider}`, 'Run the scripted steps one by one.'],
    work,
    {
      HOME: home,
      CODEX_HOME: home,
      GATEWAY_KEY
    }
  )
}

/** Codex run through `gateway` to the scripted end: every step handed out, and every request the upstream was sent taken. */
async function runToScriptEnd(gateway: ServerProcess, fake: FakeOpenAi, script: ReturnType<typeof scripted>): Promise<void> {
  expectScriptEnd(await runCodex(gateway.url), fake.refused, script.handed.size, STEPS)
}

describe.skipIf(missing !== undefined)(`Codex CLI ${CODEX_VERSION} through the gateway's Responses proxy, end to end`, () => {
  const servers: ServerProcess[] = []
  let fixed = 0
  afterAll(() => {
    for (const s of servers) s.child.kill('SIGKILL')
  })

  it('runs the session with compaction off, every request valid, to the scripted end (and measures what its tools and instructions take)', async () => {
    const fake = await new FakeOpenAi().start()
    const script = scripted()
    fake.fallback = script.reply
    const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, 'off')
    servers.push(gateway)
    await runToScriptEnd(gateway, fake, script)
    const [first] = fake.requests
    expect(first?.body.stream).toBe(true)
    expect(first?.body.store).toBe(false)
    expect(first?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`)
    fixed = openAiFixedTokens(first as OpenAiRequest, 'responses')
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it('crosses the budget several times with summaries written ahead, every request valid and within the bound, to the scripted end', async () => {
    expect(fixed, 'the first run measured what Codex sends every turn').toBeGreaterThan(0)
    const fake = await new FakeOpenAi().start()
    const script = scripted()
    fake.fallback = script.reply
    const budget = fixed + ROOM
    const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, { budget, summaryModel: 'gpt-summarizer' })
    servers.push(gateway)
    await runToScriptEnd(gateway, fake, script)

    const forwarded = fake.requests.filter((r) => !isSummaryCall(r))
    const { proxied, compactions } = boundedRun(gateway, budget)
    // Codex's tools and instructions (its leading developer items) go on as it sent them, every turn.
    const firstInput = inputOf(forwarded[0] as OpenAiRequest)
    const leading = firstInput.findIndex((i) => i.role !== 'developer')
    expect(firstInput[0]?.type).toBe('additional_tools')
    for (const r of forwarded) expect(inputOf(r).slice(0, leading)).toEqual(firstInput.slice(0, leading))
    // Between two compactions the summary item is the same, byte for byte: the upstream's prompt cache holds.
    const summaryChanges = changes(forwarded.map((r) => inputOf(r)[leading]))
    expect(summaryChanges).toBeLessThanOrEqual(compactions.length)
    // The compactions are kept under the session Codex names in its session-id header.
    const session = forwarded[0]?.headers['session-id'] as string
    expect(session).toMatch(/./)
    expect(await listedCompactions(gateway.url, session, GATEWAY_KEY)).toBe(compactions.length)

    writeReport('codex', {
      client: `codex ${CODEX_VERSION}`,
      budget,
      fixed_tokens: fixed,
      model_ms: MODEL_MS,
      requests: forwarded.length,
      summary_calls: fake.requests.length - forwarded.length,
      ...crossingFigures(proxied, compactions, MODEL_MS),
      summary_item_changes: summaryChanges
    })
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it("lets its model get back a line the compactions removed: the gateway's recall tool called, answered, the value used; its session holds no call of it", async () => {
    expect(fixed, 'the first run measured what Codex sends every turn').toBeGreaterThan(0)
    const fake = await new FakeOpenAi().start()
    const script = scripted(undefined, true)
    const recallOutput = (r: OpenAiRequest): string | undefined => {
      const last = inputOf(r).at(-1)
      return last?.type === 'function_call_output' && last.call_id === 'call_recall_e2e' ? String(last.output) : undefined
    }
    let askedWithout: boolean | undefined
    fake.fallback = (r) => {
      const found = recallOutput(r)
      const end = (text: string): FakeOpenAiReply => ({
        output: [{ type: 'message', id: 'msg_end', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }]
      })
      if (found !== undefined) return end(`SCRIPT-END reached. The codename is ${/codename is ([\w-]+)/.exec(found)?.[1] ?? 'unknown'}.`)
      const reply = script.reply(r)
      const offered = ((r.body.tools ?? []) as unknown as { name?: string }[]).some((t) => t.name === PROXY_RECALL_TOOL)
      if (!isSummaryCall(r) && JSON.stringify(reply.output ?? '').includes('SCRIPT-END') && offered) {
        askedWithout = !JSON.stringify(inputOf(r)).includes('bluefin-7')
        return {
          output: [
            { type: 'reasoning', id: 'rs_recall_e2e', summary: [], encrypted_content: `gAAAAB${'q'.repeat(200)}` },
            {
              type: 'function_call',
              id: 'fc_recall_e2e',
              status: 'completed',
              call_id: 'call_recall_e2e',
              name: PROXY_RECALL_TOOL,
              arguments: JSON.stringify({ query: 'rollout codename' })
            }
          ]
        }
      }
      return reply
    }
    const budget = fixed + ROOM
    const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, { budget, summaryModel: 'gpt-summarizer' })
    servers.push(gateway)
    const home = mkdtempSync(join(tmpdir(), 'cg-e2e-codex-home-'))
    const { code, out } = await runCodex(gateway.url, home)
    expect(code, out).toBe(0)
    expect(fake.refused).toEqual([])
    expect(askedWithout, 'the line was compacted out of the prompt before the model asked').toBe(true)
    expect(out).toContain('The codename is bluefin-7.')
    // Codex's own record of the session: the answer, and no call of the gateway's tool
    const stored = clientFiles(home)
    expect(stored).toContain('bluefin-7')
    expect(stored).not.toContain(PROXY_RECALL_TOOL)
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it.each(OTHER_PACES)(
    'runs to the scripted end at another pace ($name): every request valid, every crossing forwarded with what was at hand',
    async (pace) => {
      expect(fixed, 'the first run measured what Codex sends every turn').toBeGreaterThan(0)
      const fake = await new FakeOpenAi().start()
      const script = scripted(pace)
      fake.fallback = script.reply
      const budget = fixed + ROOM
      const gateway = await openAiGateway(fake.url, UPSTREAM_KEY, GATEWAY_KEY, { budget, summaryModel: 'gpt-summarizer' })
      servers.push(gateway)
      await runToScriptEnd(gateway, fake, script)
      paceReport('codex', pace, boundedRun(gateway, budget), fake.requests.filter(isSummaryCall).length)
      gateway.child.kill('SIGTERM')
      await fake.close()
    },
    600_000
  )
})
