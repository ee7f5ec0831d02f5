import type { SessionCost } from '../contract/reports.js'

const n = (x: number): string => Math.round(x).toLocaleString('en')
const plural = (count: number, one: string, many = `${one}s`): string => `${n(count)} ${count === 1 ? one : many}`

/** The cost in a sentence or two, as an operator reads it; empty where the proxy answered nothing of the session. */
export function describeCost(cost: SessionCost): string {
  if (cost.requests === 0 && cost.summary_calls === 0) return ''
  const u = cost.upstream
  const billed = `Through the proxy: ${plural(cost.requests, 'request')}, billed by the upstream for ${n(u.input_tokens)} input, ${n(u.cache_creation_input_tokens)} cache-write, ${n(u.cache_read_input_tokens)} cache-read and ${n(u.output_tokens)} output tokens; ${plural(cost.summary_calls, 'summary call')}.`
  if (cost.tokens_kept_out === 0) return `${billed} Compaction has kept nothing out of its prompts yet.`
  const { saved_share: share, saved_units: saved } = cost.estimate
  const verdict =
    saved >= 0 ? `about ${Math.round(100 * share)}% less than without compaction` : `about ${Math.round(-100 * share)}% more than without compaction`
  return `${billed} Compaction kept ${n(cost.tokens_kept_out)} tokens out of its prompts: ${verdict} (an estimate: cache writes at 1.25x, reads at 0.1x, output at 5x the input price; without compaction each request would also have sent what was kept out of it, read from the cache where it read from it, and no summary would have been written).`
}
