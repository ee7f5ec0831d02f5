import { SUMMARY_CLOSE, SUMMARY_OPEN } from './markers.js'
import { LIST_SECTIONS, type ListSection, SECTION_HEADINGS, type SummarySections, emptySections } from './sections.js'

/**
 * The text form of a summary and its parser. Items are "- " lines; an item's further lines
 * are indented by two spaces, so a verbatim request with headings or tags in it cannot break the form.
 */
export const SUMMARY_FORMAT_VERSION = 1

export interface SummaryHeader {
  id: string
  compactedTurns: number
}

const HEADING_TO_KEY = new Map<string, 'objective' | ListSection>(
  Object.entries(SECTION_HEADINGS).map(([k, h]) => [h.toLowerCase(), k as 'objective' | ListSection])
)

function escapeAttr(value: string): string {
  return value.replace(/[^A-Za-z0-9_.:-]/g, '_')
}

function openingLine(header: SummaryHeader): string {
  return `${SUMMARY_OPEN} id="${escapeAttr(header.id)}" version="${SUMMARY_FORMAT_VERSION}" compacted_turns="${header.compactedTurns}">`
}

/** The objective as the text form holds it: one line. */
export function oneLine(objective: string): string {
  return objective.replace(/\s*\n\s*/g, ' ').trim()
}

/**
 * The length formatSummary's text would have, counted without building it: fitting a summary to its
 * budget measures many candidates, and the verbatim requests in them can be long.
 */
export function formattedLength(sections: SummarySections, header: SummaryHeader): number {
  let chars = openingLine(header).length + 1 + SUMMARY_CLOSE.length
  const objective = oneLine(sections.objective)
  if (objective) chars += 3 + SECTION_HEADINGS.objective.length + 1 + objective.length + 1
  for (const key of LIST_SECTIONS) {
    const items = sections[key]
    if (items.length === 0) continue
    chars += headingLength(key)
    for (const item of items) chars += itemLength(item)
  }
  return chars
}

/** What a list section's heading adds to the text form (present when the list has an item). */
export function headingLength(key: ListSection): number {
  return 3 + SECTION_HEADINGS[key].length + 1
}

/** What one item of a list adds to the text form. */
export function itemLength(item: string): number {
  let lines = 1
  for (let i = item.indexOf('\n'); i >= 0; i = item.indexOf('\n', i + 1)) lines++
  // every line of an item gets a two-character prefix; its own newlines stay as the separators
  return item.length + 2 * lines + 1
}

export function formatSummary(sections: SummarySections, header: SummaryHeader): string {
  const lines = [openingLine(header)]
  const objective = oneLine(sections.objective)
  if (objective) lines.push(`## ${SECTION_HEADINGS.objective}`, objective)
  for (const key of LIST_SECTIONS) {
    const items = sections[key]
    if (items.length === 0) continue
    lines.push(`## ${SECTION_HEADINGS[key]}`)
    for (const item of items) {
      const [first, ...rest] = item.split('\n')
      lines.push(`- ${first}`, ...rest.map((l) => `  ${l}`))
    }
  }
  lines.push(SUMMARY_CLOSE)
  return lines.join('\n')
}

export interface ParsedSummary {
  id: string
  compactedTurns: number
  sections: SummarySections
}

/** Parses a summary text back into its sections; undefined when the text is not a summary. */
export function parseSummary(text: string): ParsedSummary | undefined {
  const start = text.indexOf(SUMMARY_OPEN)
  if (start < 0) return undefined
  const headerEnd = text.indexOf('>', start)
  if (headerEnd < 0) return undefined
  const header = text.slice(start, headerEnd)
  const closeAt = text.lastIndexOf(`\n${SUMMARY_CLOSE}`)
  const body = text.slice(headerEnd + 1, closeAt < 0 ? text.length : closeAt)
  const id = /\bid="([^"]*)"/.exec(header)?.[1] ?? ''
  const compactedTurns = Number(/\bcompacted_turns="(\d+)"/.exec(header)?.[1] ?? 0)

  const sections = emptySections()
  let key: 'objective' | ListSection | undefined
  const objective: string[] = []
  for (const line of body.split('\n')) {
    if (line.startsWith('## ')) {
      key = HEADING_TO_KEY.get(line.slice(3).trim().toLowerCase())
      continue
    }
    if (key === undefined) continue
    if (key === 'objective') {
      if (line.trim()) objective.push(line.trim())
      continue
    }
    const items = sections[key]
    if (line.startsWith('- ')) items.push(line.slice(2))
    else if (line.startsWith('  ') && items.length > 0) items[items.length - 1] += `\n${line.slice(2)}`
  }
  sections.objective = objective.join(' ')
  return { id, compactedTurns, sections }
}
