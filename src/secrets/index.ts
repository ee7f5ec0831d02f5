import { type Redact, type RedactMany, type SecretRange, applyRedactions, findSecrets } from '../compaction/index.js'
import { secretlintRanges } from './secretlint.js'
import { at as elementAt } from '../compaction/index.js'

/**
 * The service's redaction: secretlint's recommended preset for the providers it covers, and the
 * service's own patterns (src/compaction/secret-patterns.ts) for the kinds it lacks or needs context
 * for, applied at once. Everything the service writes or sends goes through it.
 */
export function rulesetRanges(text: string): SecretRange[] {
  return [...findSecrets(text), ...secretlintRanges(text)]
}

export const serviceRedact: Redact = (text) => (text.length === 0 ? text : applyRedactions(text, rulesetRanges(text)))

/**
 * secretlint's ranges for many texts from one pass over them joined (its rules cost per call, not only
 * per character), each range cut back to the texts it covers.
 */
function secretlintRangesOfEach(texts: readonly string[]): SecretRange[][] {
  const starts: number[] = []
  let at = 0
  for (const t of texts) {
    starts.push(at)
    at += t.length + 1
  }
  const each: SecretRange[][] = texts.map(() => [])
  for (const r of secretlintRanges(texts.join('\n'))) {
    for (let k = 0; k < texts.length; k++) {
      const from = elementAt(starts, k)
      const to = from + elementAt(texts, k).length
      if (r.end <= from || r.start >= to) continue
      elementAt(each, k).push({ start: Math.max(r.start, from) - from, end: Math.min(r.end, to) - from, kind: r.kind })
    }
  }
  return each
}

/** Values shorter than this are not remembered: they could stand for something else elsewhere. */
const MIN_REMEMBERED = 8

export interface CompactionRedactors {
  /** The full ruleset: secretlint's preset and the service's own patterns. */
  redact: Redact
  /** The service's own patterns alone, quick enough for whole texts before they are clipped. */
  redactBeforeClip: Redact
  /** The full ruleset over many texts, in one pass of secretlint's rules. */
  redactParts: RedactMany
  /** The secrets found so far (value, kind). */
  known: () => [string, string][]
}

/**
 * The redactions for one compaction. All remember every secret they find and from then on replace
 * that exact value wherever it shows up, even bare: a model that repeats a key from the span without
 * the `password=` that gave it away is still caught in its answer, the cache and the records. `found`: the
 * secrets the compaction's redactors on another thread found already (Redactors.known).
 */
export function compactionRedactors(found: Iterable<readonly [string, string]> = []): CompactionRedactors {
  const known = new Map<string, string>(found)
  const apply = (text: string, ranges: SecretRange[]): string => {
    if (text.length === 0) return text
    for (const r of ranges) {
      const value = text.slice(r.start, r.end)
      if (value.length >= MIN_REMEMBERED) known.set(value, r.kind)
    }
    for (const [value, kind] of known) {
      for (let at = text.indexOf(value); at >= 0; at = text.indexOf(value, at + value.length)) ranges.push({ start: at, end: at + value.length, kind })
    }
    return applyRedactions(text, ranges)
  }
  return {
    redact: (text) => apply(text, rulesetRanges(text)),
    redactBeforeClip: (text) => apply(text, findSecrets(text)),
    known: () => [...known],
    redactParts: (texts) => {
      const linted = secretlintRangesOfEach(texts)
      return texts.map((text, k) => apply(text, [...findSecrets(text), ...elementAt(linted, k)]))
    }
  }
}

export { secretlintRanges }
