/** A session's compactions as a chart's series: no DOM here, so that the shape is tested on its own. */

import type { TimelinePoint } from '../contract/schemas.js'

export interface Sawtooth {
  /** The x of each point: compaction n's prompt before it at n, after it at n + DROP (a drop, drawn all but upright). */
  x: number[]
  /** The prompt's size at each x. */
  prompt: number[]
  /** The budget in force at each x; null where none was ('off', or a record older than the budget field). */
  budget: (number | null)[]
  /** The compaction each x belongs to. */
  ids: string[]
}

/** How far right of its compaction the prompt after it is drawn: x stays strictly increasing. */
export const DROP = 0.02

/**
 * The sawtooth: the prompt climbs to each compaction's size before it, and falls to its size after. The
 * client's requests between compactions are not kept, so the climb is drawn straight. `first` is the
 * number of the first point's compaction in its session (the newest of a long session are drawn).
 */
export function sawtooth(points: readonly TimelinePoint[], first = 1): Sawtooth {
  const out: Sawtooth = { x: [], prompt: [], budget: [], ids: [] }
  points.forEach((p, i) => {
    const n = first + i
    out.x.push(n, n + DROP)
    out.prompt.push(p.raw_history_tokens, p.context_after_compaction)
    out.budget.push(p.budget_tokens, p.budget_tokens)
    out.ids.push(p.compaction_id, p.compaction_id)
  })
  return out
}

/** One line a screen reader reads for the chart. */
export function describeTimeline(points: readonly TimelinePoint[], complete: boolean): string {
  if (points.length === 0) return 'No compactions.'
  const before = points.map((p) => p.raw_history_tokens)
  const after = points.map((p) => p.context_after_compaction)
  const budgets = [...new Set(points.map((p) => p.budget_tokens).filter((b): b is number => b !== null))]
  const n = points.length
  const fmt = (v: number): string => v.toLocaleString('en-US')
  const span = (values: number[]): string =>
    Math.min(...values) === Math.max(...values) ? fmt(Math.min(...values)) : `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`
  return [
    `${complete ? '' : 'The newest '}${fmt(n)} compaction${n === 1 ? '' : 's'}:`,
    `the prompt reached ${span(before)} tokens before ${n === 1 ? 'it' : 'each'}`,
    `and ${span(after)} after.`,
    budgets.length === 0
      ? ''
      : budgets.length === 1
        ? `Budget ${fmt(budgets[0] ?? 0)} tokens.`
        : `Budget ${span(budgets)} tokens (${fmt(budgets.length)} budgets).`
  ]
    .filter(Boolean)
    .join(' ')
}
