import { Type } from 'typebox'
import { compiledCheck } from '../contract/validation.js'
import { LIST_SECTIONS, SECTION_PURPOSE, type SummarySections, emptySections } from '../compaction/index.js'

/** The forced tool whose input is the summary: structured by construction. */
export const SUMMARY_TOOL_NAME = 'record_summary'

const listProperties = Object.fromEntries(
  LIST_SECTIONS.map((k) => [k, Type.Optional(Type.Array(Type.String(), { description: SECTION_PURPOSE[k] }))])
) as unknown as Record<(typeof LIST_SECTIONS)[number], ReturnType<typeof Type.Optional>>

/** Every section may be left out (it is then empty); any section present must have the right shape. */
export const SummaryToolInput = Type.Object({ objective: Type.Optional(Type.String({ description: SECTION_PURPOSE.objective })), ...listProperties })

export const summaryTool = {
  name: SUMMARY_TOOL_NAME,
  description: 'Record the structured summary of the span. Call it exactly once, with every section you can fill.',
  input_schema: JSON.parse(JSON.stringify(SummaryToolInput)) as { type: 'object'; [k: string]: unknown }
}

/** The model's tool input as sections, or the first thing wrong with it (for the one retry). */
export function readToolInput(input: unknown): { sections: SummarySections } | { error: string } {
  const check = compiledCheck(SummaryToolInput)
  if (!check(input)) {
    const first = check.errors?.[0]
    const where = first?.instancePath || '/'
    return { error: `the ${SUMMARY_TOOL_NAME} input at ${where} ${first?.message ?? 'is invalid'}` }
  }
  const value = input as Record<string, unknown>
  const sections = emptySections()
  sections.objective = typeof value.objective === 'string' ? value.objective : ''
  for (const key of LIST_SECTIONS) {
    const items = value[key]
    if (Array.isArray(items)) sections[key] = items.filter((i): i is string => typeof i === 'string' && i.trim() !== '')
  }
  return { sections }
}
