import type { Ledger } from './ledger.js'
import { LIST_SECTIONS, type SummarySections, emptySections, itemPath } from './sections.js'

const FILE_SECTIONS = new Set(['files_modified', 'files_inspected'])

/**
 * Anchored, iterative summarization: the newer summary's facts are laid over the older one's, and
 * nothing of the older one is dropped. A file keeps one entry, the newer description winning; a user
 * request is kept verbatim once; any other item that the newer summary restates (the same words,
 * perhaps followed by more, such as "(superseded: …)") is replaced by the restatement in place.
 */
export function mergeSections(older: SummarySections, newer: SummarySections): SummarySections {
  const out = emptySections()
  out.objective = newer.objective.trim() || older.objective.trim()
  for (const key of LIST_SECTIONS) {
    if (FILE_SECTIONS.has(key)) {
      const byPath = new Map<string, string>()
      for (const item of [...older[key], ...newer[key]]) byPath.set(itemPath(item), item)
      out[key] = [...byPath.values()]
    } else if (key === 'user_requests') {
      out[key] = dedupe([...older[key], ...newer[key]])
    } else {
      out[key] = layOver(older[key], newer[key])
    }
  }
  // A file once modified is listed there only, even when a later span merely read it.
  const modified = new Set(out.files_modified.map(itemPath))
  out.files_inspected = out.files_inspected.filter((i) => !modified.has(itemPath(i)))
  return out
}

/** Lower case, words only: how two statements of one fact are compared. */
function normalized(item: string): string {
  return item
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim()
}

/** Shorter than this, a prefix says too little to count as the same fact. */
const MIN_RESTATED_CHARS = 12

function layOver(older: readonly string[], newer: readonly string[]): string[] {
  const out = dedupe(older)
  const keys = out.map(normalized)
  for (const item of dedupe(newer)) {
    const key = normalized(item)
    const same = keys.findIndex((k) => k === key || (Math.min(k.length, key.length) >= MIN_RESTATED_CHARS && (key.startsWith(k) || k.startsWith(key))))
    if (same >= 0) {
      out[same] = item
      keys[same] = key
    } else {
      out.push(item)
      keys.push(key)
    }
  }
  return out
}

function dedupe(items: readonly string[]): string[] {
  const seen = new Set<string>()
  const out: string[] = []
  for (const item of items) {
    const key = item.trim()
    if (key && !seen.has(key)) {
      seen.add(key)
      out.push(item)
    }
  }
  return out
}

function mentions(items: readonly string[], path: string): boolean {
  return items.some((i) => itemPath(i) === path || i.includes(path))
}

/**
 * The guard: every file the ledger saw modified or read and every request the user made in the span
 * appears in the summary; what the model left out is put back from the ledger. Returns how many facts
 * were put back.
 */
export function guardSections(sections: SummarySections, ledger: Ledger): { sections: SummarySections; added: number } {
  const out: SummarySections = { ...sections }
  for (const key of LIST_SECTIONS) out[key] = [...sections[key]]
  let added = 0
  for (const f of ledger.filesModified) {
    if (!mentions(out.files_modified, f.path)) {
      out.files_modified.push(`${f.path} — ${f.how.join('; ')}`)
      out.files_inspected = out.files_inspected.filter((i) => itemPath(i) !== f.path)
      added++
    }
  }
  for (const path of ledger.filesRead) {
    if (!mentions(out.files_inspected, path) && !mentions(out.files_modified, path)) {
      out.files_inspected.push(path)
      added++
    }
  }
  // Requests the ledger saw are laid out verbatim in the user's order, after those it did not see
  // (a prior summary's); the model's paraphrases of them are not kept twice.
  const fromLedger = new Set(ledger.userRequests.map((r) => r.text.trim()))
  const present = new Set(out.user_requests.map((r) => r.trim()))
  added += [...fromLedger].filter((r) => !present.has(r)).length
  out.user_requests = [...out.user_requests.filter((r) => !fromLedger.has(r.trim())), ...dedupe(ledger.userRequests.map((r) => r.text))]
  return { sections: out, added }
}
