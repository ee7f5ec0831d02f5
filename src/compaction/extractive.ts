import { sliceHead } from './clip.js'
import type { CommandRun, ErrorSeen, Finding, Ledger } from './ledger.js'
import { currentTask, requestEntries, taskStatement } from './requests.js'
import { type SummarySections, emptySections } from './sections.js'

/** How many of the newest commands of each outcome the progress lines name, and how many errors are listed. */
const PROGRESS_COMMANDS = 6
const RECENT_ERRORS = 12

/** The label of the one entry that says where the work stood; a merge keeps only the newest. */
export const WORK_STOOD = 'Where the work stood:'
/** The label of the agent's to-do entries; a merge keeps only the newest list. */
export const TODO_LABEL = 'To-do'
/** The label of the plan the agent laid out; a merge keeps only the newest. */
export const PLAN_LABEL = 'Plan:'
/** The label of the progress lines (commands run, by outcome); a merge keeps only the newest. */
export const PROGRESS_LABEL = 'Progress'

function firstLine(text: string, max: number): string {
  const line =
    text
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? ''
  return line.length > max ? `${sliceHead(line, max - 1)}…` : line
}

/** A line that names an error and says nothing more (`Error`, `Error: Error`): no reason. */
const EMPTY_REASON = /^(?:\w*(?:Error|Exception))(?::\s*(?:\w*(?:Error|Exception))?)?$/i

function errorEntry(e: ErrorSeen): string {
  const lines = e.lines.filter((l) => !EMPTY_REASON.test(l.trim()))
  const why = lines.length > 0 ? `: ${lines.join(' | ')}` : ''
  const times = e.count > 1 ? ` (${e.count} times)` : ''
  // an exit status is stated only where the history holds it
  const later =
    e.superseded_exit_code === undefined
      ? 'a later run of it still printed a failure'
      : `a later run of it exited ${e.superseded_exit_code} but still printed a failure`
  const state = e.resolved ? ' — resolved: a later run of it succeeded and printed no failure' : e.superseded ? ` — ${later}` : ''
  return `${e.tool} \`${e.call}\` failed${times}${why}${state}`
}

function findingEntry(f: Finding): string {
  const state = f.gone ? ' — gone: a later run of it printed none of this' : ''
  const ran = f.exit_code === undefined ? 'printed' : `exited ${f.exit_code} but printed`
  return `\`${f.call}\` ${ran}: ${f.lines.join(' | ')}${state}`
}

/**
 * Failures since resolved matter less than their reasons: all the ways one call failed before it
 * succeeded are one entry, each reason once.
 */
function resolvedByCall(errors: readonly ErrorSeen[]): ErrorSeen[] {
  const byCall = new Map<string, ErrorSeen>()
  for (const e of errors) {
    const key = `${e.tool}\n${e.call}\n${e.resolved ? 'resolved' : 'superseded'}`
    const prior = byCall.get(key)
    byCall.set(key, prior ? { ...e, count: prior.count + e.count, lines: [...new Set([...prior.lines, ...e.lines])].slice(0, 6) } : e)
  }
  return [...byCall.values()]
}

/** The commands run, one line per outcome: how many, and the newest few of each. */
function progressLines(commands: readonly CommandRun[]): string[] {
  const groups: [string, (c: CommandRun) => boolean][] = [
    ['ok', (c) => c.outcome === 'ok' && c.shows === undefined],
    ['exited 0, printed failures', (c) => c.outcome === 'ok' && c.shows !== undefined],
    ['failed', (c) => c.outcome === 'error'],
    ['found nothing', (c) => c.outcome === 'no_match'],
    ['no result yet', (c) => c.outcome === 'pending']
  ]
  const out: string[] = []
  for (const [label, belongs] of groups) {
    const runs = commands.filter(belongs)
    if (runs.length === 0) continue
    const names = [...new Set(runs.map((c) => firstLine(c.command, 80)))]
    const newest = names.slice(-PROGRESS_COMMANDS).map((n) => `\`${n}\``)
    const more = names.length > newest.length ? ` and ${names.length - newest.length} more` : ''
    out.push(`${PROGRESS_LABEL} — ${label} (${runs.length} run${runs.length > 1 ? 's' : ''}): ${newest.join(', ')}${more}`)
  }
  return out
}

/**
 * A summary built from facts alone, with no model: the ledger, the prior summary's sections (merged by
 * the caller) and the agent's own words. It is always available, so a compaction never fails for want
 * of a summarizer. The pipeline redacts it with every other summary.
 */
export function extractiveSections(ledger: Ledger, latestAssistantText: string): SummarySections {
  const s = emptySections()
  const requests = ledger.userRequests.map((r) => r.text)
  const shapes = ledger.userRequests.map((r) => r.shape)
  // The objective is the task the work is on at the cut; the first task stays among the requests.
  const task = currentTask(requests, shapes) ?? taskStatement(requests, shapes)
  const doing = ledger.todos.find((t) => t.status === 'in_progress')
  s.objective = task ? `${task.objective}${doing ? ` (in progress: ${doing.content})` : ''}` : (doing?.content ?? '')
  s.user_requests = requestEntries(requests, shapes)
  if (ledger.acknowledgements.length > 0) {
    const said = [...new Set(ledger.acknowledgements.map((a) => JSON.stringify(a.length > 20 ? `${sliceHead(a, 19)}…` : a)))].slice(-8)
    const n = ledger.acknowledgements.length
    s.user_requests.push(`(${n} short ${n === 1 ? 'reply' : 'replies'} folded: ${said.join(', ')})`)
  }
  s.files_modified = ledger.filesModified.map((f) => `${f.path} — ${f.how.join('; ')}`)
  s.files_inspected = [...ledger.filesRead]
  // Tests first, each with its latest status; then what runs showed; then errors, unresolved ones last so
  // the newest state is nearest.
  const tests = ledger.tests.map((t) => (t.status === 'failed' ? `FAILING ${t.id}${t.reason ? ` — ${t.reason}` : ''}` : `${t.id} — failed earlier, passes now`))
  const past = (e: ErrorSeen): boolean => e.resolved || e.superseded === true
  const errors = [...resolvedByCall(ledger.errors.filter(past)), ...ledger.errors.filter((e) => !past(e))]
    .sort((a, b) => a.message_index - b.message_index)
    .slice(-RECENT_ERRORS)
  s.failing_tests_and_errors = [
    ...tests,
    ...ledger.findings.map(findingEntry),
    ...errors.filter(past).map(errorEntry),
    ...errors.filter((e) => !past(e)).map(errorEntry)
  ]
  s.rejected_approaches = [...new Set(ledger.rejected)].map((call) => `the user rejected \`${call}\``)
  // The plan is the agent's own: its to-do list, else the list it laid out; what it ran is progress.
  s.current_plan = [
    ...(ledger.todos.length > 0 ? ledger.todos.map((t) => `${TODO_LABEL} [${t.status}]: ${t.content}`) : ledger.statedPlan.map((p) => `${PLAN_LABEL} ${p}`)),
    ...progressLines(ledger.commands)
  ]
  // Next: the to-do in progress, then what the agent last said it would do (else where its last message left off).
  if (doing) s.next_steps.push(`${TODO_LABEL} [in_progress]: ${doing.content}`)
  const stood = ledger.intention ?? lastParagraph(latestAssistantText)
  if (stood) s.next_steps.push(`${WORK_STOOD} ${stood}`)
  return s
}

/** The last paragraph of a text, on one line, at most 600 characters. */
function lastParagraph(text: string): string {
  const paragraphs = text.trim().split(/\n\s*\n/)
  const last = (paragraphs[paragraphs.length - 1] ?? '').replace(/\s+/g, ' ').trim()
  return last.length > 600 ? `${sliceHead(last, 599)}…` : last
}
