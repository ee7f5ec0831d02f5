/** The summary's sections: one source for their keys, headings and order. */
export const LIST_SECTIONS = [
  'user_requests',
  'current_plan',
  'files_modified',
  'files_inspected',
  'key_decisions',
  'rejected_approaches',
  'constraints',
  'failing_tests_and_errors',
  'open_questions',
  'user_preferences',
  'next_steps'
] as const

export type ListSection = (typeof LIST_SECTIONS)[number]

export type SummarySections = { objective: string } & { [K in ListSection]: string[] }

export const SECTION_HEADINGS: Record<'objective' | ListSection, string> = {
  objective: 'Objective',
  user_requests: 'User requests (verbatim, newest last)',
  current_plan: 'Current plan',
  files_modified: 'Files modified',
  files_inspected: 'Files inspected',
  key_decisions: 'Key decisions',
  rejected_approaches: 'Rejected approaches',
  constraints: 'Constraints',
  failing_tests_and_errors: 'Failing tests and errors',
  open_questions: 'Open questions',
  user_preferences: 'User preferences',
  next_steps: 'Next steps'
}

/** What each section holds, for the summarizer's tool schema and the doctrine. */
export const SECTION_PURPOSE: Record<'objective' | ListSection, string> = {
  objective: 'What the user is trying to achieve overall, in one or two sentences.',
  user_requests: "The user's requests, verbatim, oldest first.",
  current_plan: 'The steps of the plan being followed, marking what is done.',
  files_modified: 'Each file changed, as "path — what changed".',
  files_inspected: 'Each file read or searched for understanding, as "path — what was learned".',
  key_decisions: 'Decisions taken and why; mark superseded ones as superseded.',
  rejected_approaches: 'Approaches tried or considered and dropped, with the reason.',
  constraints: 'Constraints the work must respect (versions, APIs, rules the user set).',
  failing_tests_and_errors: 'Failing tests, errors and their exact messages, and whether they are fixed.',
  open_questions: 'Questions still open.',
  user_preferences: 'How the user wants the work done (style, tools, things to avoid).',
  next_steps: 'What to do next, most immediate first.'
}

export function emptySections(): SummarySections {
  const s = { objective: '' } as SummarySections
  for (const k of LIST_SECTIONS) s[k] = []
  return s
}

const QUOTES = /^`|`$/g

/** The path an item of a files section names: the text before " — ". */
export function itemPath(item: string): string {
  const dash = item.indexOf(' — ')
  const path = (dash < 0 ? item : item.slice(0, dash)).trim()
  // Once per file of a summary: no pattern (a new object at every call) unless there are quotes to strip.
  return path.includes('`') ? path.replace(QUOTES, '') : path
}
