import { rules } from '@secretlint/secretlint-rule-preset-recommend'
import type { SecretRange } from '../compaction/index.js'

/**
 * secretlint's recommended preset (MIT, maintained with the providers' formats) run synchronously over
 * a text: each rule's `file` handler reports ranges through the context it is created with. Rules
 * that only filter others (comment directives) are left out.
 */

interface Report {
  range: readonly [number, number]
}

interface RuleHandlers {
  file?: (source: { content: string; filePath: string; ext: string; contentType: 'text' }) => void
}

interface RuleCreator {
  meta: { id: string; type?: string }
  create: (context: unknown, options: unknown) => RuleHandlers
}

const SKIPPED = new Set(['@secretlint/secretlint-rule-filter-comments'])
// AWS key ids are found by the service's own patterns; the preset's id scan would triple its cost.
const OPTIONS: Record<string, unknown> = {}

interface BoundRule {
  kind: string
  handlers: RuleHandlers
}

let found: SecretRange[] = []

/** One rule created once, its reports collected into `found` under its kind. */
function bind(rule: RuleCreator): BoundRule {
  const kind = rule.meta.id.replace('@secretlint/secretlint-rule-', '')
  const context = {
    createTranslator: () => (id: string) => id,
    report: (r: Report) => found.push({ start: r.range[0], end: r.range[1], kind }),
    ignore: () => undefined,
    registerRule: () => undefined
  }
  return { kind, handlers: rule.create(context, OPTIONS[rule.meta.id] ?? {}) }
}

const BOUND: readonly BoundRule[] = (rules as unknown as RuleCreator[]).filter((r) => !SKIPPED.has(r.meta.id)).map(bind)

/** The secrets secretlint's recommended rules find in a text. */
export function secretlintRanges(text: string): SecretRange[] {
  found = []
  const source = { content: text, filePath: 'span.txt', ext: '.txt', contentType: 'text' as const }
  for (const rule of BOUND) rule.handlers.file?.(source)
  const out = found
  found = []
  return out
}
