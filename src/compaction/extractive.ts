import type { Ledger } from './ledger.js'
import { type SummarySections, emptySections } from './sections.js'

/** How many of the newest commands and errors an extractive summary lists before fitting. */
const RECENT_COMMANDS = 12
const RECENT_ERRORS = 12

/**
 * The first line that says something: blank lines, bare tags (`<pr_description>`) and lines that only
 * introduce what follows (`Consider the following PR description:`) are skipped.
 */
function firstLine(text: string, max: number): string {
  const lines = text.split('\n').map((l) => l.trim())
  const line = lines.find((l) => l !== '' && !/^<\/?[\w-]+>$/.test(l) && !l.endsWith(':')) ?? lines.find((l) => l !== '') ?? ''
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

/**
 * A summary built from facts alone, with no model: the ledger, the prior summary's sections (merged by
 * the caller) and the latest assistant text. It is always available, so a compaction never fails for
 * want of a summarizer. The pipeline redacts it with every other summary.
 */
export function extractiveSections(ledger: Ledger, latestAssistantText: string): SummarySections {
  const s = emptySections()
  const firstRequest = ledger.userRequests[0]?.text
  if (firstRequest) s.objective = firstLine(firstRequest, 300)
  s.user_requests = ledger.userRequests.map((r) => r.text)
  s.files_modified = ledger.filesModified.map((f) => `${f.path} — ${f.how.join('; ')}`)
  s.files_inspected = [...ledger.filesRead]
  s.failing_tests_and_errors = ledger.errors.slice(-RECENT_ERRORS).map((e) => {
    const why = e.lines.length > 0 ? `: ${e.lines.join(' | ')}` : ''
    return `${e.tool} \`${e.call}\` failed${why}`
  })
  // Commands run are what was done; the latest assistant text is where the work stood.
  s.current_plan = ledger.commands
    .slice(-RECENT_COMMANDS)
    .map((c) => `done: \`${firstLine(c.command, 160)}\` → ${c.outcome}${c.exit_code !== undefined ? ` (exit ${c.exit_code})` : ''}`)
  if (latestAssistantText.trim()) s.next_steps = [`Where the work stood (latest assistant message): ${latestAssistantText.trim().slice(0, 1_500)}`]
  return s
}
