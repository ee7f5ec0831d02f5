import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import { FakeGemini, type GeminiRequest } from '../helpers/fake-gemini.js'
import { OTHER_PACES, type Pace, boundedRun, clientFiles, crossingFigures, paceReport, runClient, writeReport } from '../helpers/e2e.js'
import { type ServerProcess, installedClient, startServer, tempDb } from '../helpers/process.js'

/**
 * The real Gemini CLI (from npm, installed by scripts/install-clients.sh into .clients/) runs a scripted
 * session through the gateway's Gemini proxy (GOOGLE_GEMINI_BASE_URL): its routing call asks for JSON, its
 * turns stream (`streamGenerateContent?alt=sse`), each a `run_shell_command` it runs for real, each call with
 * its thought signature, which the upstream requires back where it was (as Gemini 3 models do). The upstream
 * refuses what Gemini's API refuses; summaries are the extractive ones.
 */
export const GEMINI_CLI_VERSION = '0.61.0'
const { bin: BIN, missing } = installedClient(`Gemini CLI ${GEMINI_CLI_VERSION}`, `gemini-cli-${GEMINI_CLI_VERSION}`, '@google/gemini-cli/bundle/gemini.js')

const GATEWAY_KEY = 'gw-e2e-gemini-cli-key-0001'
const UPSTREAM_KEY = 'gemini-e2e-upstream-0000000000'
const TURN_MS = Number(process.env.E2E_TURN_MS ?? 500)
const STEPS = 30
const BUDGET = 70_000
const CODENAME_LINE = 'INFO the rollout codename is bluefin-7'

/** The script: each answer runs the next step's command (found from the newest output), then the end. */
function script(body: GeminiRequest['body']): Record<string, unknown>[] {
  const outputs = (body.contents ?? []).flatMap((c) =>
    c.parts.map((p) => JSON.stringify((p.functionResponse as { response?: unknown } | undefined)?.response ?? ''))
  )
  const done = [...outputs.join('\n').matchAll(/step (\d+) output line/g)].map((m) => Number(m[1]))
  const next = done.length === 0 ? 0 : Math.max(...done) + 1
  if (next >= STEPS) return [{ text: 'SCRIPT-END reached.' }]
  // (the first step's output opens with a line the recall test's end needs)
  const command = `${next === 0 ? `echo '${CODENAME_LINE}'; ` : ''}seq 1 700 | sed 's/^/step ${next} output line /'`
  return [
    {
      functionCall: { name: 'run_shell_command', args: { command, description: `Print step ${next}` } },
      thoughtSignature: Buffer.from(`signature of step ${next}`).toString('base64')
    }
  ]
}

/** Gemini CLI run to its end in non-interactive mode against `baseUrl`, with a home (its settings: API-key auth, no folder trust prompt) and a work folder of its own. */
async function runGeminiCli(baseUrl: string, home = mkdtempSync(join(tmpdir(), 'cg-e2e-gemini-home-'))): Promise<{ code: number | null; out: string }> {
  const work = mkdtempSync(join(tmpdir(), 'cg-e2e-gemini-work-'))
  mkdirSync(join(home, '.gemini'), { recursive: true })
  writeFileSync(
    join(home, '.gemini', 'settings.json'),
    JSON.stringify({
      security: { auth: { selectedType: 'gemini-api-key' }, folderTrust: { enabled: false } },
      general: { disableAutoUpdate: true },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false }
    })
  )
  return runClient(process.execPath, [BIN, '-p', 'Run the scripted steps one by one.', '--yolo'], work, {
    HOME: home,
    GOOGLE_GEMINI_BASE_URL: baseUrl,
    GEMINI_API_KEY: GATEWAY_KEY,
    GEMINI_CLI_NO_RELAUNCH: 'true',
    NO_COLOR: '1'
  })
}

describe.skipIf(missing !== undefined)(`Gemini CLI ${GEMINI_CLI_VERSION} through the gateway, end to end`, () => {
  const servers: ServerProcess[] = []
  afterAll(() => {
    for (const s of servers) s.child.kill('SIGKILL')
  })

  it('crosses the budget, every request valid (signatures where they were), to the scripted end, its compactions recorded', async () => {
    const fake = await new FakeGemini().start()
    fake.key = UPSTREAM_KEY
    fake.requireSignatures = true
    fake.script = script
    fake.delayMs = TURN_MS
    const gateway = await startServer({
      GEMINI_API_KEY: UPSTREAM_KEY,
      GOOGLE_GEMINI_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
      COMPACT_DB: tempDb(),
      COMPACT_BUDGET: String(BUDGET)
    })
    servers.push(gateway)
    const run = await runGeminiCli(gateway.url)
    expect(run.code, run.out).toBe(0)
    expect(run.out).toContain('SCRIPT-END reached.')
    expect(fake.refused).toEqual([])
    const turns = fake.requests.filter((r) => r.path.includes(':streamGenerateContent'))
    // every step ran: the newest output of the last turn is the last step's
    expect(JSON.stringify(turns.at(-1)?.body.contents?.at(-1) ?? '')).toContain(`step ${STEPS - 1} output line`)
    const bounded = boundedRun(gateway, BUDGET)
    const listed = (await (await fetch(`${gateway.url}/v1/sessions`, { headers: { 'x-api-key': GATEWAY_KEY } })).json()) as {
      sessions: { compactions: number }[]
    }
    expect(listed.sessions.reduce((n, s) => n + s.compactions, 0)).toBe(bounded.compactions.length)
    writeReport('gemini-cli', {
      client: `gemini-cli ${GEMINI_CLI_VERSION}`,
      budget: BUDGET,
      requests: fake.requests.length,
      turns: turns.length,
      ...crossingFigures(bounded.proxied, bounded.compactions, TURN_MS)
    })
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  it("lets its model get back a line the compactions removed: the gateway's recall tool called, answered, the value used; its session holds no call of it", async () => {
    const fake = await new FakeGemini().start()
    fake.key = UPSTREAM_KEY
    fake.requireSignatures = true
    fake.delayMs = TURN_MS
    let askedWithout: boolean | undefined
    fake.script = (body) => {
      const last = (body.contents ?? []).at(-1)
      const found = last?.parts.find((p) => (p.functionResponse as { name?: unknown } | undefined)?.name === PROXY_RECALL_TOOL)
      if (found) return [{ text: `SCRIPT-END reached. The codename is ${/codename is ([\w-]+)/.exec(JSON.stringify(found))?.[1] ?? 'unknown'}.` }]
      const parts = script(body)
      if (parts[0]?.text === 'SCRIPT-END reached.' && JSON.stringify(body.tools ?? []).includes(`"${PROXY_RECALL_TOOL}"`)) {
        askedWithout = !JSON.stringify(body.contents).includes('bluefin-7')
        return [
          {
            functionCall: { name: PROXY_RECALL_TOOL, args: { query: 'rollout codename' } },
            thoughtSignature: Buffer.from('signature of the recall').toString('base64')
          }
        ]
      }
      return parts
    }
    const gateway = await startServer({
      GEMINI_API_KEY: UPSTREAM_KEY,
      GOOGLE_GEMINI_BASE_URL: fake.url,
      COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
      COMPACT_DB: tempDb(),
      COMPACT_BUDGET: String(BUDGET)
    })
    servers.push(gateway)
    const home = mkdtempSync(join(tmpdir(), 'cg-e2e-gemini-home-'))
    const run = await runGeminiCli(gateway.url, home)
    expect(run.code, run.out).toBe(0)
    expect(fake.refused).toEqual([])
    expect(askedWithout, 'the line was compacted out of the prompt before the model asked').toBe(true)
    expect(run.out).toContain('The codename is bluefin-7.')
    // Gemini CLI's own record of the session: the answer, and no call of the gateway's tool
    const stored = clientFiles(home)
    expect(stored).toContain('bluefin-7')
    expect(stored).not.toContain(PROXY_RECALL_TOOL)
    gateway.child.kill('SIGTERM')
    await fake.close()
  }, 600_000)

  /** Gemini writing the gateway's summaries (COMPACT_SUMMARIZER=gemini), at the paces the other clients run: 1.5 s turns with 8 s summaries, turns back to back, a model that never answers. */
  const PACES: Pace[] = [{ name: 'gemini-summaries', turnMs: 1_500, summaryMs: 8_000 }, ...OTHER_PACES]
  it.each(PACES)(
    'runs to the scripted end at a pace ($name), Gemini writing the summaries: every request valid, every crossing forwarded with what was at hand',
    async (pace) => {
      const fake = await new FakeGemini().start()
      fake.key = UPSTREAM_KEY
      fake.requireSignatures = true
      fake.script = script
      fake.delayMs = pace.turnMs
      fake.summaryDelayMs = pace.summaryMs
      fake.summaries = [{ args: { objective: 'Run the scripted steps (SCRIPT-MAIN)', next_steps: ['Run the next scripted step'] } }]
      const gateway = await startServer({
        GEMINI_API_KEY: UPSTREAM_KEY,
        GOOGLE_GEMINI_BASE_URL: fake.url,
        COMPACT_API_KEYS: `e2e=${GATEWAY_KEY}`,
        COMPACT_DB: tempDb(),
        COMPACT_BUDGET: String(BUDGET),
        COMPACT_SUMMARIZER: 'gemini',
        COMPACT_MODEL: 'gemini-summary'
      })
      servers.push(gateway)
      const run = await runGeminiCli(gateway.url)
      expect(run.code, run.out).toBe(0)
      expect(run.out).toContain('SCRIPT-END reached.')
      expect(fake.refused).toEqual([])
      const summaryCalls = fake.requests.filter((r) => r.raw.includes('"record_summary"')).length
      paceReport('gemini-cli', pace, boundedRun(gateway, BUDGET), summaryCalls)
      gateway.child.kill('SIGKILL')
      await fake.close()
    },
    600_000
  )
})
