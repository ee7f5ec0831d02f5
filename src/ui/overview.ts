/** The overview as GET /v1/overview gives it, and the words the page says of it: no DOM here, so that they are tested on their own. */

import type { Overview } from '../contract/reports.js'

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US')
const plural = (n: number, one: string, many = `${one}s`): string => `${fmt(n)} ${n === 1 ? one : many}`
const pct = (part: number, whole: number): string => `${Math.round((100 * part) / whole)}%`

/** An amount in the prices' currency (a code of three capitals, as the configuration takes it), to the cent; under a cent, to a hundredth of one. */
export function money(amount: number, currency: string): string {
  const digits = Math.abs(amount) < 0.01 && amount !== 0 ? 4 : 2
  return new Intl.NumberFormat('en-US', { style: 'currency', currency, minimumFractionDigits: digits, maximumFractionDigits: digits }).format(amount)
}

/** A wait in words: milliseconds under a second, else seconds. */
export function duration(ms: number): string {
  return ms < 1_000 ? `${ms < 10 ? ms.toFixed(1).replace(/\.0$/, '') : fmt(ms)} ms` : `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`
}

/** The headline figures, each a label, a value and a line under it. */
export function headline(o: Overview): { label: string; value: string; note: string }[] {
  const { compactions: c, crossings: x, requests: r, savings: s } = o
  return [
    {
      label: 'Tokens kept out of prompts',
      value: fmt(r.tokens_kept_out),
      note: r.count === 0 ? 'No request through the proxies yet.' : `over ${plural(r.count, 'proxied request')}`
    },
    {
      label: 'Compactions',
      value: fmt(c.total),
      note:
        (c.total === 0
          ? 'None in this range.'
          : `${fmt(c.via_proxy)} by the proxies, ${fmt(c.via_compact_route)} by POST /v1/compact; ${fmt(c.tokens_removed)} tokens removed`) +
        (o.clearings.count > 0
          ? `; ${plural(o.clearings.count, 'crossing')} answered by clearing ${plural(o.clearings.tool_results, 'old tool result')} (${fmt(o.clearings.tokens_cleared)} tokens)`
          : '')
    },
    {
      label: 'Crossing wait',
      value: x.mean_wait_ms === null ? '–' : duration(x.mean_wait_ms),
      note: x.count === 0 ? 'No proxied request crossed its budget.' : `mean of ${plural(x.count, 'crossing')}; longest ${duration(x.max_wait_ms ?? 0)}`
    },
    {
      label: 'Saved (estimate)',
      value: r.metered === 0 ? '–' : money(s.saved, s.prices.currency),
      note:
        r.metered === 0
          ? "Nothing metered: the estimate reads the usage in the proxies' answers."
          : s.saved_share === null
            ? ''
            : `${Math.abs(Math.round(100 * s.saved_share))}% ${s.saved >= 0 ? 'less' : 'more'} than without compaction`
    }
  ]
}

/** Who wrote the summaries, as shares of the compactions, each part with its count. */
export function writerParts(o: Overview): { key: 'model' | 'extractive' | 'fallback' | 'cache'; label: string; count: number }[] {
  const s = o.summaries
  const models = Object.keys(s.models)
  const reasons = Object.entries(s.fallback_reasons).map(([why, n]) => `${why} ${fmt(n)}`)
  return [
    { key: 'model' as const, label: `a model${models.length > 0 ? ` (${models.join(', ')})` : ''}`, count: s.model },
    { key: 'extractive' as const, label: 'extractive, chosen', count: s.extractive_chosen },
    { key: 'fallback' as const, label: `extractive, fallback${reasons.length > 0 ? ` (${reasons.join(', ')})` : ''}`, count: s.fallback },
    { key: 'cache' as const, label: 'the summary cache', count: s.cache }
  ].filter((p) => p.count > 0)
}

/** The writers in a sentence, for the bar's caption and a screen reader. */
export function describeWriters(o: Overview): string {
  const total = o.compactions.total
  const parts = writerParts(o)
  if (total === 0 || parts.length === 0) return 'No summaries were written in this range.'
  return `Of ${plural(total, 'summary', 'summaries')}: ${parts.map((p) => `${pct(p.count, total)} ${p.label}`).join('; ')}.`
}

/** The crossings' waits by bucket, as rows of a table. */
export function waitRows(o: Overview): { bucket: string; count: number }[] {
  let below = 0
  return o.crossings.waits.map((w) => {
    const bucket =
      w.up_to_ms === null ? `over ${duration(below)}` : below === 0 ? `up to ${duration(w.up_to_ms)}` : `${duration(below)} – ${duration(w.up_to_ms)}`
    if (w.up_to_ms !== null) below = w.up_to_ms
    return { bucket, count: w.count }
  })
}

/** The estimate in words: what it reads, at what prices, and what it leaves out. */
export function describeSavings(o: Overview): string {
  const { savings: s, requests: r, summary_calls: calls } = o
  const p = s.prices
  const at = `at ${money(p.input, p.currency)} input, ${money(p.output, p.currency)} output, ${money(p.cache_write, p.currency)} cache-write and ${money(p.cache_read, p.currency)} cache-read per million tokens`
  if (r.metered === 0) return `No metered answer of the proxies in this range: the estimate reads the upstream's own usage from them (${at}).`
  const u = r.upstream
  const measured = describeMeasured(o)
  return [
    `Billed: ${money(s.billed, p.currency)}, for ${plural(r.metered, 'metered request')} (${fmt(u.input_tokens)} input, ${fmt(u.cache_creation_input_tokens)} cache-write, ${fmt(u.cache_read_input_tokens)} cache-read and ${fmt(u.output_tokens)} output tokens, as the upstream reported them) and ${plural(calls.calls, 'summary call')} (${fmt(calls.input_tokens)} input, ${fmt(calls.output_tokens)} output tokens).`,
    `Without compaction: ${money(s.without_compaction, p.currency)}, the same requests each also sending the ${fmt(r.metered_tokens_kept_out)} tokens compaction kept out of them (${fmt(r.metered_tokens_kept_out_cached)} at the cache-read price, where the request read from the cache; the rest at the input price), and no summary call.`,
    `Prices ${at} (COMPACT_PRICE_*). A floor: a longer prompt would also have written more to the cache, and past its window it would have failed.`,
    ...(measured ? [measured] : [])
  ].join(' ')
}

/** What the control group measured, in words; empty without one (COMPACT_CONTROL_SHARE). */
export function describeMeasured(o: Overview): string {
  const m = o.measured
  if (!m) return ''
  const groups = `${plural(m.treated_requests, 'request')} of compacted conversations against ${plural(m.control_requests, 'request')} of the control group (COMPACT_CONTROL_SHARE, sent through uncompacted)`
  if (m.saved_share === null) return `Measured: ${groups}, but no length of history has both yet.`
  const share = (x: number): string => `${Math.round(100 * Math.abs(x))}% ${x >= 0 ? 'less' : 'more'}`
  const interval = m.interval
    ? ` (95% interval: ${Math.round(100 * m.interval.low)}% to ${Math.round(100 * m.interval.high)}% saved)`
    : ' (too few requests yet for an interval)'
  return `Measured: ${share(m.saved_share)} billed per request than without compaction${interval}, over ${groups}, compared between histories of similar length.`
}

/** The range's ends in local time, for the overview's heading. */
export function describeRange(o: Overview): string {
  const opts: Intl.DateTimeFormatOptions = { dateStyle: 'medium', timeStyle: 'short' }
  return `${new Date(o.from).toLocaleString(undefined, opts)} – ${new Date(o.to).toLocaleString(undefined, opts)}${o.session_id === null ? ', every conversation' : `, session ${o.session_id}`}`
}
