/**
 * Summaries of real sessions, measured with rules of the eval's own (never the summarizer's): how much
 * of a summary is text other sessions' prompts hold word for word (harness text), how many of the user's
 * own lines it keeps, whether a "resolved" error was shown gone, whether the plan is a plan and the
 * objective the task at the cut, noise (ANSI codes, two spellings of one file, non-paths as files,
 * rejected calls as errors), what a small budget keeps, and what the model summarizer is sent.
 * Each transcript is compacted as the service would once it has seen the corpus's other sessions.
 */
import {
  DEFAULT_RENDER,
  type Message,
  finishCompaction,
  isToolResult,
  isToolUse,
  planCompaction,
  renderSpan,
  spanText,
  textTokens,
  toolResultText
} from '../src/compaction/index.js'
import { ConversationsText } from '../src/service/conversations.js'
import { type Transcript, short, table } from './corpus.js'

const BUDGET = 45_000
const SMALL_BUDGET = 20_000

/** The prompts' lines as a person reads them: trimmed, blank ones out. */
function promptLines(messages: Message[]): string[] {
  const out: string[] = []
  for (const m of messages) {
    if (m.role !== 'user') continue
    const blocks = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content
    if (blocks.some((b) => isToolResult(b))) continue
    for (const b of blocks)
      if (b.type === 'text' && typeof b.text === 'string' && !b.text.includes('<compaction-summary'))
        for (const l of b.text.split('\n')) if (l.trim()) out.push(l.trim())
  }
  return out
}

function prompts(messages: Message[]): string[] {
  return messages
    .filter((m) => m.role === 'user' && (typeof m.content === 'string' || !m.content.some((b) => isToolResult(b))))
    .map((m) => (typeof m.content === 'string' ? m.content : m.content.map((b) => (b.type === 'text' ? String(b.text) : '')).join('\n')))
}

function compact(messages: Message[], budget: number, common?: ReturnType<ConversationsText['common']>) {
  const plan = planCompaction({
    messages,
    mode: 'manual',
    budgetTokens: budget,
    sizingBudgetTokens: budget,
    keepTokens: Math.floor(budget / 3),
    keepTurns: 8,
    dryRun: false,
    ...(common ? { commonText: common } : {})
  })
  return plan.summarize ? { plan, out: finishCompaction(plan, { id: 'cmp_sessions' }) } : undefined
}

/**
 * A line a person typed, by the eval's own rule: four words or more, not aligned in columns, not markup,
 * not a numbered listing line, an option of a help text or a transcript marker (`[Transcript segment
 * begins here…]`): pasted output and a client's markers are not the user's words.
 */
function isProse(line: string): boolean {
  return (line.match(/\p{L}{2,}/gu) ?? []).length >= 4 && !/ {3,}|\t/.test(line) && !/^(?:<|-{1,2}\w|\d+:|\(\d+ more lines|\[[^\]]{3,}\])/.test(line)
}

/** Lines outside worked examples (a harness's demonstration of another task, between its marker lines). */
function withoutDemonstrations(lines: string[]): string[] {
  let inside = false
  return lines.filter((l) => {
    if (/^-+ *END OF DEMONSTRATION/i.test(l)) return void (inside = false)
    if (/^-+ *DEMONSTRATION/i.test(l)) return void (inside = true)
    return !inside
  })
}

/** Lines outside a command's output that a client wraps in an element (`<bash-stdout>…</bash-stdout>`): output is not the user's words. */
function withoutOutputs(lines: string[]): string[] {
  let open: string | undefined
  return lines.filter((l) => {
    if (open !== undefined) {
      if (l.includes(`</${open}>`)) open = undefined
      return false
    }
    const m = /<([\w-]*(?:stdout|stderr|output))>/.exec(l)
    if (!m) return true
    if (!l.includes(`</${m[1]}>`)) open = m[1]
    return false
  })
}

/** Lines compared with their numbers left out ("found 2 actions", "found 3 actions"). */
const numbersOut = (line: string): string => line.replace(/\d+/g, '#')
const FAILURE = /\bFAIL(?:ED|URE)?\b|Traceback|\w+Error\b|\w+Exception\b|AssertionError/
// eslint-disable-next-line no-control-regex -- the escape character is what is looked for
const ANSI_CODE = /\u001b\[|\[\d{1,3}(?:;\d{1,3})*m/
const NOT_PATH = /[\s*?[\]{}()<>=,;'"`|]/
const REJECTED = /doesn't want to proceed|does not want to proceed|rejected|denied by the user/i
const WORDS = (t: string): Set<string> =>
  new Set(
    (t.toLowerCase().match(/[a-z0-9_]{4,}/g) ?? []).filter(
      (w) => !['this', 'that', 'with', 'from', 'have', 'what', 'when', 'your', 'please', 'will', 'should'].includes(w)
    )
  )

/** The output of the last run of a command (first line) in a span. */
/** An output that holds its command's exit status, as the harnesses write it (the eval's own rule). */
const EXIT_STATUS = /returncode|exit (?:code|status)|exited with|Command finished with exit code/i

function lastOutput(span: Message[], command: string): string | undefined {
  const calls = new Map<string, string>()
  let out: string | undefined
  for (const m of span) {
    if (typeof m.content === 'string') continue
    for (const b of m.content) {
      if (isToolUse(b)) {
        const c = (b.input as { command?: unknown } | null)?.command
        if (typeof c === 'string') calls.set(b.id, c.split('\n')[0]!.trim())
      } else if (isToolResult(b) && calls.get(b.tool_use_id) === command) out = toolResultText(b)
    }
  }
  return out
}

function failingTests(text: string): string[] {
  return [...text.matchAll(/FAILING (\S+)/g)].map((m) => m[1]!)
}

export function sessionsEval(transcripts: Transcript[]): void {
  // Which transcripts' prompts hold each line: a line of another's is "text other sessions also sent".
  const holders = new Map<string, Set<number>>()
  transcripts.forEach((t, i) => {
    for (const l of promptLines(t.messages))
      if (l.length >= 12) (holders.get(numbersOut(l)) ?? holders.set(numbersOut(l), new Set()).get(numbersOut(l))!).add(i)
  })
  const elsewhere = (line: string, i: number): boolean => [...(holders.get(numbersOut(line)) ?? [])].some((k) => k !== i)
  // The service's memory, as it would be once every other session had been compacted.
  const conversations = new ConversationsText()
  for (const t of transcripts) conversations.learn('', t.name, prompts(t.messages))

  const rows: (string | number)[][] = []
  const shares: number[] = []
  /** Each transcript as a fresh process's first session compacts it: with the shipped seed of harness texts, and without. */
  const freshShares: number[] = []
  const unseededShares: number[] = []
  const sharesSmall: number[] = []
  const ownShares: number[] = []
  const totals = {
    own: 0,
    ownKept: 0,
    misleading: 0,
    planLogs: 0,
    objective: 0,
    counted: 0,
    ansi: 0,
    spellings: 0,
    nonPaths: 0,
    rejectedErrors: 0,
    statusClaims: 0,
    tests: 0,
    testsSmall: 0,
    inputBefore: 0,
    inputAfter: 0
  }
  transcripts.forEach((t, i) => {
    const run = compact(t.messages, BUDGET, conversations.common('', t.name))
    if (!run) return
    const { plan, out } = run
    const text = out.summary.text
    const s = out.summary.sections
    const lines = text
      .split('\n')
      .map((l) => l.replace(/^\s*-\s+/, '').trim())
      .filter(Boolean)
    const shared = lines.filter((l) => elsewhere(l, i)).reduce((n, l) => n + l.length, 0)
    const share = shared / Math.max(1, text.length)
    shares.push(share)
    const sharedIn = (summary: string): number =>
      summary
        .split('\n')
        .map((l) => l.replace(/^\s*-\s+/, '').trim())
        .filter((l) => l && elsewhere(l, i))
        .reduce((n, l) => n + l.length, 0) / Math.max(1, summary.length)
    const fresh = compact(t.messages, BUDGET, new ConversationsText().common('', t.name))
    const unseeded = compact(t.messages, BUDGET, new ConversationsText(undefined, new Set()).common('', t.name))
    if (fresh) freshShares.push(sharedIn(fresh.out.summary.text))
    if (unseeded) unseededShares.push(sharedIn(unseeded.out.summary.text))
    // the user's own lines: prose, in no other session's prompts, and sent once in this one
    const spanLines = withoutOutputs(withoutDemonstrations(promptLines(plan.span)))
    const once = new Map<string, number>()
    for (const l of spanLines) once.set(l, (once.get(l) ?? 0) + 1)
    const own = [...once].filter(([l, n]) => n === 1 && l.length >= 12 && isProse(l) && !elsewhere(l, i)).map(([l]) => l)
    const kept = own.filter((l) => text.includes(l)).length
    if (process.env.EVAL_DEBUG && t.name.includes(process.env.EVAL_DEBUG))
      for (const l of own.filter((l) => !text.includes(l))) console.log('own line not kept:', l)
    // "resolved" where the command's last run still printed a failure
    const misleading = s.failing_tests_and_errors
      .filter((e) => / — resolved/.test(e))
      .filter((e) => {
        const cmd = /`([^`]+)`/.exec(e)?.[1]
        const output = cmd ? lastOutput(plan.span, cmd) : undefined
        return output !== undefined && output.split('\n').some((l) => FAILURE.test(l) && !/warning/i.test(l))
      }).length
    const planLogs = s.current_plan.filter((p) => /^done: `/.test(p) || /^`[^`]+` →/.test(p)).length
    // the objective is about the latest request that asks for something (the eval's rule: 40 characters or more, sent once, not another session's)
    const asks = prompts(plan.span).filter((p) => p.trim().length >= 40 && !p.split('\n').every((l) => l.trim().length < 12 || elsewhere(l.trim(), i)))
    const latest = asks[asks.length - 1]
    const ow = WORDS(s.objective)
    const objectiveOk = latest === undefined || [...WORDS(latest)].filter((w) => ow.has(w)).length >= Math.min(2, ow.size)
    const ansi = ANSI_CODE.test(text) ? 1 : 0
    const files = [...s.files_modified, ...s.files_inspected].map((f) => f.split(' — ')[0]!.trim()).filter((f) => !f.startsWith('('))
    const spellings = files.filter((f) => f.startsWith('/') && files.some((g) => !g.startsWith('/') && g.includes('/') && f.endsWith(`/${g}`))).length
    const nonPaths = files.filter((f) => NOT_PATH.test(f)).length
    const rejectedErrors = s.failing_tests_and_errors.filter((e) => {
      const cmd = /`([^`]+)`/.exec(e)?.[1]
      const output = cmd ? lastOutput(plan.span, cmd) : undefined
      return output !== undefined && REJECTED.test(output) && / failed/.test(e)
    }).length
    // under a small budget: the failing tests the full summary names, and the share of others' text
    const small = compact(t.messages, SMALL_BUDGET, conversations.common('', t.name))
    const tests = failingTests(text)
    const testsSmall = small ? tests.filter((id) => small.out.summary.text.includes(id)).length : 0
    if (small)
      sharesSmall.push(
        small.out.summary.text
          .split('\n')
          .map((l) => l.replace(/^\s*-\s+/, '').trim())
          .filter((l) => elsewhere(l, i))
          .reduce((n, l) => n + l.length, 0) / Math.max(1, small.out.summary.text.length)
      )
    // what the model summarizer is sent: prompts as sent, against the user's words
    const before = textTokens(spanText(renderSpan(plan.span, 0, { ...DEFAULT_RENDER, prompts: 'as-sent' })))
    // (the model is sent the harness text told by markup and repetition: not what a replica has seen elsewhere)
    const after = textTokens(spanText(renderSpan(plan.span, 0, DEFAULT_RENDER)))

    if (own.length > 0) ownShares.push(kept / own.length)
    totals.own += own.length
    totals.ownKept += kept
    totals.misleading += misleading
    totals.planLogs += planLogs
    totals.objective += objectiveOk ? 1 : 0
    totals.counted++
    totals.ansi += ansi
    totals.spellings += spellings
    totals.nonPaths += nonPaths
    totals.rejectedErrors += rejectedErrors
    // an exit status the summary states (`cmd` exited N) that the command's output in the span does not hold
    const statusClaims = [...s.failing_tests_and_errors, ...s.current_plan].filter((e) => {
      const claim = /`([^`]+)` exited (\d+)/.exec(e)
      if (!claim) return false
      const output = lastOutput(plan.span, claim[1]!)
      return output !== undefined && !EXIT_STATUS.test(output)
    }).length
    totals.statusClaims += statusClaims
    totals.tests += tests.length
    totals.testsSmall += testsSmall
    totals.inputBefore += before
    totals.inputAfter += after
    rows.push([
      short(t.name),
      `${(100 * share).toFixed(1)}%`,
      `${kept}/${own.length}`,
      misleading,
      planLogs,
      objectiveOk ? 'yes' : 'NO',
      ansi + spellings + nonPaths + rejectedErrors,
      `${testsSmall}/${tests.length}`,
      before,
      after
    ])
  })
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? 0
  const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(1)}%`)
  const verdict = (ok: boolean): string => (ok ? 'meets' : 'misses')
  rows.push([
    `TOTAL (${totals.counted})`,
    `median ${(100 * median(shares)).toFixed(1)}%`,
    pct(totals.ownKept, totals.own),
    totals.misleading,
    totals.planLogs,
    `${totals.objective}/${totals.counted}`,
    totals.ansi + totals.spellings + totals.nonPaths + totals.rejectedErrors,
    `${totals.testsSmall}/${totals.tests}`,
    totals.inputBefore,
    totals.inputAfter
  ])
  console.log(
    `\nsummaries of real sessions (rules of the eval's own; each transcript compacted at budget ${BUDGET} as the service would once it had seen the others; the small budget is ${SMALL_BUDGET})\n`
  )
  console.log(
    table(
      [
        'transcript',
        "others' text in summary",
        'own lines kept',
        'resolved yet failing',
        'plan items that are commands',
        'objective at the cut',
        'noise',
        `failing tests kept at ${SMALL_BUDGET}`,
        'model input tokens (as sent)',
        'model input tokens (user words)'
      ],
      rows
    )
  )
  console.log(
    [
      `targets: text other sessions also sent, median share of a summary ${(100 * median(shares)).toFixed(1)}% (max ${(100 * Math.max(0, ...shares)).toFixed(1)}%; at budget ${SMALL_BUDGET}: median ${(100 * median(sharesSmall)).toFixed(1)}%) (≤ 5%: ${verdict(median(shares) <= 0.05)})`,
      `text other sessions also sent, in a fresh process's first session (no traffic seen): median ${(100 * median(freshShares)).toFixed(1)}% of a summary with the shipped seed of harness texts (max ${(100 * Math.max(0, ...freshShares)).toFixed(1)}%), ${(100 * median(unseededShares)).toFixed(1)}% without it (max ${(100 * Math.max(0, ...unseededShares)).toFixed(1)}%); the seed is made from this corpus (scripts/harness-seed.ts), so this figure is in-sample (≤ 5%: ${verdict(median(freshShares) <= 0.05)})`,
      `the user's own lines kept ${pct(totals.ownKept, totals.own)} of all (≥ 95%: ${verdict(totals.own === 0 || totals.ownKept / totals.own >= 0.95)}); median of the transcripts ${(100 * median(ownShares)).toFixed(1)}%, lowest ${(100 * Math.min(1, ...ownShares)).toFixed(1)}% (a session whose requests alone pass the summary's share of the budget cannot keep them all)`,
      `errors called resolved whose command still printed a failure: ${totals.misleading} (0: ${verdict(totals.misleading === 0)})`,
      `plan entries that are commands run: ${totals.planLogs} (0: ${verdict(totals.planLogs === 0)})`,
      `objective about the latest request: ${totals.objective}/${totals.counted}`,
      `exit statuses stated that the history does not hold: ${totals.statusClaims} (0: ${verdict(totals.statusClaims === 0)})`,
      `noise: ANSI codes in ${totals.ansi} summaries, ${totals.spellings} files under a second spelling, ${totals.nonPaths} non-paths as files, ${totals.rejectedErrors} rejected calls as errors (0: ${verdict(totals.ansi + totals.spellings + totals.nonPaths + totals.rejectedErrors === 0)})`,
      `failing tests of the full summary still named at budget ${SMALL_BUDGET}: ${pct(totals.testsSmall, totals.tests)} (≥ 95%: ${verdict(totals.tests === 0 || totals.testsSmall / totals.tests >= 0.95)})`,
      `model summarizer input: ${totals.inputAfter} tokens against ${totals.inputBefore} with prompts as sent (${(totals.inputAfter / Math.max(1, totals.inputBefore)).toFixed(3)}x)`
    ].join('\n')
  )
}
