/**
 * What makes an extractive summary worth resuming from, measured with rules of the eval's own (not the
 * summarizer's): the objective is a real request, errors say why, no error twice, no empty search taken
 * for a failure, failing tests named, the objective steady over three rounds, one "where the work stood".
 */
import { type Message, type SummarySections, finishCompaction, isToolResult, isToolUse, planCompaction, toolResultText } from '../src/compaction/index.js'

const BUDGET = 45_000

export interface Quality {
  objectiveReal: boolean
  tracebacks: number
  tracebacksWithException: number
  duplicateErrors: number
  emptySearchErrors: number
  failingTests: number
  failingTestsNamed: number
  singleTask: boolean
  objectiveSteady: boolean
  workStood: number
  requestShare: number
  /** Calls the user declined (the eval's own reading of the clients' wordings), and those the summary lists as failures. */
  declined: number
  declinedAsFailures: number
  /** Entries of the files sections with no path, and paths listed twice under two spellings. */
  emptyFiles: number
  filesTwice: number
}

/** A result that says the user declined the call, in the wordings the eval knows of (its own list, not the service's). */
const DECLINED =
  /user (?:declined|rejected|denied)|rejected by the user|doesn't want to (?:proceed|take this action)|tell Claude what to do differently|the user chose not to|permission (?:was )?denied by (?:the )?user/i

/** The path of a files entry (before its " — " note). */
const pathOf = (entry: string): string => (entry.split(' — ')[0] ?? '').trim()

function compactOnce(messages: Message[], keepTurns = 8) {
  const plan = planCompaction({
    messages,
    mode: 'manual',
    budgetTokens: BUDGET,
    sizingBudgetTokens: BUDGET,
    keepTokens: Math.floor(BUDGET / 3),
    keepTurns,
    dryRun: false
  })
  return plan.summarize ? finishCompaction(plan, { id: 'cmp_quality' }) : undefined
}

function words(text: string): Set<string> {
  return new Set(
    (text.toLowerCase().match(/[a-z0-9_]{4,}/g) ?? []).filter((w) => !['this', 'that', 'with', 'from', 'have', 'what', 'when', 'your', 'please'].includes(w))
  )
}

function userTexts(messages: Message[]): string[] {
  return messages
    .filter((m) => m.role === 'user' && (typeof m.content === 'string' || !m.content.some(isToolResult)))
    .map((m) => (typeof m.content === 'string' ? m.content : m.content.map((b) => (b.type === 'text' ? String(b.text) : '')).join('\n')))
    .filter((t) => t.trim() !== '' && !t.includes('<compaction-summary'))
}

const numbersOut = (t: string): string => t.replace(/\d+/g, '#').trim()

/** Not a meta line (a slash command, a marker, a tag, a path), and its words come from a request the span does not repeat. */
function objectiveIsReal(objective: string, requests: string[]): boolean {
  const o = objective.trim()
  if (o === '' || /^[/<⎿]/.test(o) || /^\[[^\]]*\]$/.test(o) || /^\S*\/\S*$/.test(o)) return false
  const counts = new Map<string, number>()
  for (const r of requests) counts.set(numbersOut(r), (counts.get(numbersOut(r)) ?? 0) + 1)
  const ow = words(o)
  return requests.some((r) => {
    if ((counts.get(numbersOut(r)) ?? 0) > 1) return false
    const rw = words(r)
    let shared = 0
    for (const w of ow) if (rw.has(w)) shared++
    return shared >= Math.min(2, ow.size)
  })
}

function commandOf(input: unknown): string | undefined {
  const c = (input as { command?: unknown } | null)?.command
  return typeof c === 'string' ? c.split('\n')[0]!.trim() : undefined
}

/** The last exception line of a Python traceback in an output, found with the eval's own rule. */
function exceptionLine(output: string): string | undefined {
  const lines = output.split('\n')
  let at = -1
  lines.forEach((l, i) => {
    if (l.startsWith('Traceback (most recent call last)')) at = i
  })
  if (at < 0) return undefined
  // after the last traceback's frames (indented), the first line at the margin is the exception
  const line = lines.slice(at + 1).find((l) => l.trim() !== '' && !/^\s/.test(l))
  return line && /^[\w.]+(?::|$)/.test(line.trim()) ? line.trim() : undefined
}

const TEST_FAILED = [/^FAILED (\S+::\S+)/, /^(\S+::\S+) FAILED/, /^(?:FAIL|ERROR): (\w+) \(/, /^\s*--- FAIL: (\S+)/, /^test (\S+) \.\.\. FAILED$/]

function failingTestIds(span: Message[]): Set<string> {
  const ids = new Set<string>()
  for (const m of span) {
    if (typeof m.content === 'string') continue
    for (const b of m.content) {
      if (!isToolResult(b)) continue
      for (const line of toolResultText(b).split('\n')) {
        for (const p of TEST_FAILED) {
          const hit = p.exec(line.trimEnd())
          if (hit) ids.add(hit[1]!)
        }
      }
    }
  }
  return ids
}

function errorItems(s: SummarySections): string[] {
  return s.failing_tests_and_errors
}

/** Three compactions in a row, each over the last one's output and the next third of the transcript. */
function threeRounds(messages: Message[]): SummarySections[] {
  const cuts = [Math.floor(messages.length / 3), Math.floor((2 * messages.length) / 3)].map((c) => {
    let i = c
    while (i < messages.length && messages[i]!.role !== 'assistant') i++
    return i
  })
  const pieces = [messages.slice(0, cuts[0]), messages.slice(cuts[0], cuts[1]), messages.slice(cuts[1])]
  const out: SummarySections[] = []
  let history: Message[] = []
  for (const piece of pieces) {
    history = [...history, ...piece]
    if (history.length === 0 || history[history.length - 1]!.role !== 'user') continue
    const r = compactOnce(history, 2)
    if (!r) continue
    out.push(r.summary!.sections)
    history = r.messages!
  }
  return out
}

export function quality(messages: Message[]): Quality | undefined {
  const out = compactOnce(messages)
  if (!out) return undefined
  const span = messages.slice(0, out.kept_from)
  const s = out.summary!.sections
  const text = out.summary!.text
  const requests = userTexts(span)
  const items = errorItems(s)

  let tracebacks = 0
  let withException = 0
  let emptySearchErrors = 0
  let declined = 0
  let declinedAsFailures = 0
  const calls = new Map<string, string>()
  for (let i = 0; i < span.length; i++) {
    const m = span[i]!
    if (m.role !== 'assistant' || typeof m.content === 'string') continue
    for (const b of m.content) if (isToolUse(b)) calls.set(b.id, commandOf(b.input) ?? '')
  }
  for (const m of span) {
    if (typeof m.content === 'string') continue
    for (const b of m.content) {
      if (!isToolResult(b)) continue
      const command = calls.get(b.tool_use_id) ?? ''
      if (!command) continue
      // the entries about this command (one per distinct way it failed)
      const entries = items.filter((e) => e.includes(command.slice(0, 60)))
      const output = toolResultText(b)
      if (DECLINED.test(output.slice(0, 400))) {
        declined++
        // listed as a failure: an error entry that carries the decline as what the call printed
        const said = output.trim().split('\n')[0]!.slice(0, 40)
        if (items.some((e) => e.includes(said))) declinedAsFailures++
      }
      if (entries.length === 0) continue
      const code = /<returncode>\s*(-?\d+)|exit code (-?\d+)/.exec(output)
      const failed = b.is_error === true || (code !== null && Number(code[1] ?? code[2]) !== 0)
      const exception = failed ? exceptionLine(output) : undefined
      if (exception) {
        tracebacks++
        if (entries.some((e) => e.includes(exception.slice(0, 80)))) withException++
      }
      const quiet = output.replace(/<\/?returncode>|\d+|\[Command finished with exit code -?\d+\]/g, '').trim() === ''
      if (quiet && /^(?:cd \S+ && )?(?:grep|rg|find|test|\[)\b/.test(command)) emptySearchErrors++
    }
  }
  const duplicateErrors = items.length - new Set(items).size
  const failing = failingTestIds(span)
  const named = [...failing].filter((id) => text.includes(id)).length

  const all = userTexts(messages)
  const singleTask =
    all.length > 0 && all[0]!.length >= 400 && all.slice(1).every((r) => r.length < 400 || all.filter((x) => numbersOut(x) === numbersOut(r)).length > 1)
  const rounds = threeRounds(messages)
  const objectives = rounds.map((r) => r.objective)
  const last = rounds[rounds.length - 1]
  const requestChars = s.user_requests.join('\n').length

  const paths = [...s.files_modified, ...s.files_inspected].map(pathOf)
  const emptyFiles = paths.filter((p) => !/[\w.]/.test(p)).length
  const distinct = [...new Set(paths.filter((p) => p !== ''))]
  // the same file twice: `./x` beside `x`, or an absolute path beside the relative path of two or more
  // segments it ends with (a one-segment name may be another file of that name elsewhere)
  const filesTwice = distinct.filter((a) =>
    distinct.some((b) => a !== b && (a === `./${b}` || (a.startsWith('/') && b.includes('/') && !b.startsWith('/') && a.endsWith(`/${b}`))))
  ).length

  return {
    declined,
    declinedAsFailures,
    emptyFiles,
    filesTwice,
    objectiveReal: objectiveIsReal(s.objective, requests),
    tracebacks,
    tracebacksWithException: withException,
    duplicateErrors,
    emptySearchErrors,
    failingTests: failing.size,
    failingTestsNamed: named,
    singleTask,
    objectiveSteady: objectives.length > 0 && objectives.every((o) => o === objectives[0]),
    workStood: last ? last.next_steps.filter((n) => n.startsWith('Where the work stood')).length : 0,
    requestShare: requestChars / Math.max(1, text.length)
  }
}
