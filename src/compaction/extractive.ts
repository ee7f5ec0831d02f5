import { sliceHead } from './clip.js'
import type { ErrorSeen, Ledger } from './ledger.js'
import { requestEntries, taskStatement } from './requests.js'
import { type SummarySections, emptySections } from './sections.js'

/** How many of the newest commands and errors an extractive summary lists before fitting. */
const RECENT_COMMANDS = 12
const RECENT_ERRORS = 12

/** The label of the one entry that says where the work stood; a merge keeps only the newest. */
export const WORK_STOOD = 'Where the work stood (latest assistant message):'
/** The label of the agent's to-do entries; a merge keeps only the newest list. */
export const TODO_LABEL = 'To-do'

function firstLine(text: string, max: number): string {
  const line = text.split('\n').find((l) => l.trim() !== '')?.trim() ?? ''
  return line.length > max ? `${sliceHead(line, max - 1)}…` : line
}

function errorEntry(e: ErrorSeen): string {
  const why = e.lines.length > 0 ? `: ${e.lines.join(' | ')}` : ''
  const times = e.count > 1 ? ` (${e.count} times)` : ''
  const state = e.resolved ? ' — resolved: the same command succeeded later' : ''
  return `${e.tool} \`${e.call}\` failed${times}${why}${state}`
}

/**
 * Failures since resolved matter less than their reasons: all the ways one call failed before it
 * succeeded are one entry, each reason once.
 */
function resolvedByCall(errors: readonly ErrorSeen[]): ErrorSeen[] {
  const byCall = new Map<string, ErrorSeen>()
  for (const e of errors) {
    const key = `${e.tool}\n${e.call}`
    const prior = byCall.get(key)
    byCall.set(key, prior ? { ...e, count: prior.count + e.count, lines: [...new Set([...prior.lines, ...e.lines])].slice(0, 6) } : e)
  }
  return [...byCall.values()]
}

/**
 * A summary built from facts alone, with no model: the ledger, the prior summary's sections (merged by
 * the caller) and the latest assistant text. It is always available, so a compaction never fails for
 * want of a summarizer. The pipeline redacts it with every other summary.
 */
export function extractiveSections(ledger: Ledger, latestAssistantText: string): SummarySections {
  const s = emptySections()
  const requests = ledger.userRequests.map((r) => r.text)
  const shapes = ledger.userRequests.map((r) => r.shape)
  s.objective = taskStatement(requests, shapes)?.objective ?? ''
  s.user_requests = requestEntries(requests, shapes)
  s.files_modified = ledger.filesModified.map((f) => `${f.path} — ${f.how.join('; ')}`)
  s.files_inspected = [...ledger.filesRead]
  // Tests first, each with its latest status; then errors, unresolved ones last so the newest state is nearest.
  const tests = ledger.tests.map((t) =>
    t.status === 'failed' ? `FAILING ${t.id}${t.reason ? ` — ${t.reason}` : ''}` : `${t.id} — failed earlier, passes now`
  )
  const errors = [...resolvedByCall(ledger.errors.filter((e) => e.resolved)), ...ledger.errors.filter((e) => !e.resolved)]
    .sort((a, b) => a.message_index - b.message_index)
    .slice(-RECENT_ERRORS)
  s.failing_tests_and_errors = [...tests, ...errors.filter((e) => e.resolved).map(errorEntry), ...errors.filter((e) => !e.resolved).map(errorEntry)]
  // Commands run are what was done; the latest assistant text is where the work stood.
  s.current_plan = ledger.commands
    .slice(-RECENT_COMMANDS)
    .map((c) => `done: \`${firstLine(c.command, 160)}\` → ${c.outcome === 'no_match' ? 'no match' : c.outcome}${c.exit_code !== undefined ? ` (exit ${c.exit_code})` : ''}`)
  s.next_steps = ledger.todos.map((t) => `${TODO_LABEL} [${t.status}]: ${t.content}`)
  if (latestAssistantText.trim()) s.next_steps.push(`${WORK_STOOD} ${sliceHead(latestAssistantText.trim(), 1_500)}`)
  return s
}
