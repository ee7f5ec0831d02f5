/**
 * Savings measured rather than estimated: a share of conversations (COMPACT_CONTROL_SHARE) goes through the
 * proxies as if the gateway were not there (nothing compacted or cleared, no recall tool; what their clients
 * ask for themselves is still done), and every metered request of a conversation with a session is tallied in
 * its group (control or treated) and in its length's bin (the client's history as sent): the count, the billed
 * units and their squares. The overview compares the groups bin by bin (conversations of similar length),
 * weighs the bins by the control's requests, and gives the difference with its 95% interval.
 */
import { createHash } from 'node:crypto'

/** The bins' lower bounds, in tokens of the client's history as sent. */
export const LENGTH_BINS = [0, 25_000, 50_000, 100_000, 150_000, 200_000] as const

/** Whether a tenant's conversation is in the control group: a hash of both, so that every replica and every request of it agree. */
export function inControlGroup(keyName: string, session: string, share: number): boolean {
  if (share <= 0) return false
  if (share >= 1) return true
  const h = createHash('sha256').update(`control\u0000${keyName}\u0000${session}`).digest()
  return h.readUInt32BE(0) / 2 ** 32 < share
}

/** The bin of a request whose history is `tokens` long: its index in LENGTH_BINS. */
export function lengthBin(tokens: number): number {
  let bin = 0
  for (let i = 0; i < LENGTH_BINS.length; i++) if (tokens >= (LENGTH_BINS[i] as number)) bin = i
  return bin
}

/** One group's tallies in one bin: requests, billed units, and the units' squares. */
export interface GroupTally {
  n: number
  units: number
  squares: number
}

/** A group's requests of one bin as the overview gives them. */
export interface BinFigures {
  from_tokens: number
  to_tokens: number | null
  treated: { requests: number; units_per_request: number | null }
  control: { requests: number; units_per_request: number | null }
}

/** What the control group measured: per bin, and the treated conversations' billed units against the control's, with its interval. */
export interface MeasuredSavings {
  treated_requests: number
  control_requests: number
  bins: BinFigures[]
  /** 1 − treated / control units per request, the bins weighed by the control's requests (the treated's summary calls included); null where no bin has both. */
  saved_share: number | null
  /** Its 95% interval (normal approximation); null where either group has fewer than two requests in every bin both have. */
  interval: { low: number; high: number } | null
}

const Z95 = 1.96

/**
 * The comparison, from each group's tallies by bin and the treated conversations' summary calls (their units,
 * spread over the treated requests: they are what compaction costs besides the requests). Null where there is
 * no control request.
 */
export function measuredSavings(
  tallies: { treated: readonly (GroupTally | undefined)[]; control: readonly (GroupTally | undefined)[] },
  summaryUnits: number
): MeasuredSavings | null {
  const sum = (g: readonly (GroupTally | undefined)[]): number => g.reduce((n, t) => n + (t?.n ?? 0), 0)
  const treatedRequests = sum(tallies.treated)
  const controlRequests = sum(tallies.control)
  if (controlRequests === 0) return null
  const perSummary = treatedRequests > 0 ? summaryUnits / treatedRequests : 0
  const mean = (t: GroupTally | undefined, extra = 0): number | null => (t && t.n > 0 ? t.units / t.n + extra : null)
  /** The variance of a group's mean in a bin (its sample variance over n), or undefined with fewer than two requests. */
  const varianceOfMean = (t: GroupTally | undefined): number | undefined => {
    if (!t || t.n < 2) return undefined
    const m = t.units / t.n
    return Math.max(0, (t.squares - t.n * m * m) / (t.n - 1)) / t.n
  }
  let treatedWeighed = 0
  let controlWeighed = 0
  let variance = 0
  let both = 0
  let intervalKnown = true
  const bins: BinFigures[] = LENGTH_BINS.map((from, i) => {
    const t = tallies.treated[i]
    const c = tallies.control[i]
    const tm = mean(t, perSummary)
    const cm = mean(c)
    if (tm !== null && cm !== null && c) {
      both++
      treatedWeighed += c.n * tm
      controlWeighed += c.n * cm
      const vt = varianceOfMean(t)
      const vc = varianceOfMean(c)
      if (vt === undefined || vc === undefined) intervalKnown = false
      else variance += c.n * c.n * (vt + vc)
    }
    const round = (x: number | null): number | null => (x === null ? null : Math.round(x))
    return {
      from_tokens: from,
      to_tokens: LENGTH_BINS[i + 1] ?? null,
      treated: { requests: t?.n ?? 0, units_per_request: round(tm) },
      control: { requests: c?.n ?? 0, units_per_request: round(cm) }
    }
  })
  if (both === 0 || controlWeighed <= 0)
    return { treated_requests: treatedRequests, control_requests: controlRequests, bins, saved_share: null, interval: null }
  const share = 1 - treatedWeighed / controlWeighed
  const half = (Z95 * Math.sqrt(variance)) / controlWeighed
  const r = (x: number): number => Math.round(x * 1_000) / 1_000
  return {
    treated_requests: treatedRequests,
    control_requests: controlRequests,
    bins,
    saved_share: r(share),
    interval: intervalKnown ? { low: r(share - half), high: r(share + half) } : null
  }
}
