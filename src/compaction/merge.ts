import { PLAN_LABEL, PROGRESS_LABEL, TODO_LABEL, WORK_STOOD } from './extractive.js'
import { at } from './at.js'
import { sliceHead } from './clip.js'
import type { Ledger } from './ledger.js'
import { REPEAT_SUFFIX, entryShape, isTaskLike, requestShape, requestTitle, shapedEntries } from './requests.js'
import { LIST_SECTIONS, type SummarySections, emptySections, itemPath } from './sections.js'

const FILE_SECTIONS = new Set(['files_modified', 'files_inspected'])
/** How every "where the work stood" entry begins, whatever summary version wrote it. */
const STOOD = WORK_STOOD.slice(0, WORK_STOOD.indexOf(':')).replace(/ \(.*$/, '')

/**
 * Anchored, iterative summarization: the newer summary's facts are laid over the older one's, and
 * nothing of the older one is dropped. A file keeps one entry, the newer description winning; a user
 * request is kept verbatim once; any other item that the newer summary restates (the same words,
 * perhaps followed by more, such as "(superseded: …)") is replaced by the restatement in place.
 */
export function mergeSections(older: SummarySections, newer: SummarySections, newRequests: readonly string[] = []): SummarySections {
  const out = emptySections()
  // The objective is the task the work is on: the newer one where the newer span asked for work, else the older.
  const oldObjective = older.objective.trim()
  // A request the older summary has already (verbatim, collapsed or named as harness text) is a repeat, not a new task.
  const before = new Set(older.user_requests.map(entryShape))
  const olderText = older.user_requests.join('\n')
  const repeated = (r: string): boolean => before.has(requestShape(r)) || olderText.includes(sliceHead(r.trim().split('\n', 1)[0] ?? '', 60))
  // A task stated as an issue or PR stands until another issue or PR is stated (the rest is the harness's).
  const titled = older.user_requests.some((r) => {
    const title = requestTitle(r)
    return title !== undefined && oldObjective.startsWith(sliceHead(title, 40))
  })
  const asks = (r: string): boolean => (titled ? requestTitle(r) !== undefined : isTaskLike(r)) && !repeated(r)
  const replaced = oldObjective === '' || (newer.objective.trim() !== '' && newRequests.some(asks))
  out.objective = replaced ? newer.objective.trim() || oldObjective : oldObjective
  for (const key of LIST_SECTIONS) {
    if (FILE_SECTIONS.has(key)) {
      const byPath = new Map<string, string>()
      for (const item of [...older[key], ...newer[key]]) byPath.set(itemPath(item), item)
      out[key] = [...byPath.values()]
    } else if (key === 'user_requests') {
      out[key] = mergeRequests(older[key], newer[key])
    } else if (key === 'next_steps' || key === 'current_plan') {
      // One "where the work stood", one to-do list, one plan and one account of progress: the newest.
      // (a newer to-do list, wherever it is, makes the older one's entries stale in both sections)
      const newerTodos = [...newer.next_steps, ...newer.current_plan].some((i) => i.startsWith(`${TODO_LABEL} [`))
      const labels = (key === 'next_steps' ? [STOOD, `${TODO_LABEL} [`] : [`${TODO_LABEL} [`, PLAN_LABEL, `${PROGRESS_LABEL} — `]).filter(
        (l) => newer[key].some((i) => i.startsWith(l)) || (newerTodos && l === `${TODO_LABEL} [`)
      )
      out[key] = layOver(
        older[key].filter((i) => !labels.some((l) => i.startsWith(l))),
        newer[key]
      )
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

/**
 * What an item is about, when it names a thing whose state can change: a test (`FAILING id`, `id — failed
 * earlier, passes now`) or a failed call (`tool \`call\` failed ...`). A newer item about the same thing
 * replaces the older: the newest state wins.
 */
function subject(item: string): string | undefined {
  const test = /^FAILING (\S+)/.exec(item) ?? /^(\S+) — failed earlier, passes now/.exec(item)
  if (test) return `test ${test[1]}`
  const call = /^(\S+ `[^`]*`) failed/.exec(item)
  return call ? `call ${call[1]}` : undefined
}

function layOver(older: readonly string[], newer: readonly string[]): string[] {
  const out = dedupe(older)
  const keys = out.map(normalized)
  const subjects = out.map(subject)
  for (const item of dedupe(newer)) {
    const key = normalized(item)
    const about = subject(item)
    const same =
      about !== undefined && subjects.includes(about)
        ? subjects.indexOf(about)
        : keys.findIndex((k) => k === key || (Math.min(k.length, key.length) >= MIN_RESTATED_CHARS && (key.startsWith(k) || k.startsWith(key))))
    if (same >= 0) {
      out[same] = item
      keys[same] = key
      subjects[same] = about
    } else {
      out.push(item)
      keys.push(key)
      subjects.push(about)
    }
  }
  return out
}

/**
 * Requests of both summaries, each once: a request repeated with only its numbers changed is one entry,
 * where it last came, its counts added up.
 */
function mergeRequests(older: readonly string[], newer: readonly string[]): string[] {
  const entries = new Map<string, { text: string; count: number; varied: boolean }>()
  for (const item of [...older, ...newer]) {
    const m = REPEAT_SUFFIX.exec(item)
    const text = m ? item.slice(0, m.index) : item
    const count = m ? Number(m[1]) : 1
    const shape = requestShape(text)
    const prior = entries.get(shape)
    if (prior && prior.text.trim() === text.trim() && !m && prior.count === 1) {
      continue // the same request restated verbatim by both summaries is one request, not two, where it first came
    }
    entries.delete(shape)
    entries.set(shape, {
      text,
      count: (prior?.count ?? 0) + count,
      varied: (prior?.varied ?? false) || Boolean(m?.[2]) || (prior !== undefined && prior.text.trim() !== text.trim())
    })
  }
  return [...entries.values()].map((e) => (e.count > 1 ? `${e.text.trim()} (×${e.count}${e.varied ? ', numbers varied' : ''})` : e.text))
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

/**
 * The paths a list of items names: each item's own path, and every path-like word in its text (a model
 * writes "updated `src/a.py` to ..."). A set, so that checking a ledger of 100,000 files stays linear.
 */
function namedPaths(items: readonly string[]): Set<string> {
  const paths = new Set<string>()
  for (const item of items) {
    const own = itemPath(item)
    paths.add(own)
    // only an item with more than its path ("path — what changed", prose) can name other paths
    if (item.length === own.length) continue
    for (const word of item.split(/[\s`'"(),;]+/)) if (word.includes('/') || word.includes('.')) paths.add(word.replace(/[.:]+$/, ''))
  }
  return paths
}

/** Whether the first items are the ledger's files one by one, in the ledger's order (each item's path is the file's). */
function inOrder<T>(items: readonly string[], files: readonly T[], pathOf: (file: T) => string): boolean {
  if (items.length < files.length) return false
  for (let i = 0; i < files.length; i++) if (itemPath(at(items, i)) !== pathOf(at(files, i))) return false
  return true
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
  // The extractive summary lists the ledger's files in the ledger's order, one item a file: when every
  // file is matched so, in order, nothing is missing and no set of named paths is built (at 50,000 files
  // those sets were a sixth of the core's time). Any other summary is checked against the sets.
  let modified: Set<string> | undefined
  const modifiedNames = (): Set<string> => (modified ??= namedPaths(out.files_modified))
  if (!inOrder(out.files_modified, ledger.filesModified, (f) => f.path)) {
    const names = modifiedNames()
    const putBack = new Set<string>()
    for (const f of ledger.filesModified) {
      if (names.has(f.path)) continue
      out.files_modified.push(`${f.path} — ${f.how.join('; ')}`)
      names.add(f.path)
      putBack.add(f.path)
      added++
    }
    if (putBack.size > 0) out.files_inspected = out.files_inspected.filter((i) => !putBack.has(itemPath(i)))
  }
  if (!inOrder(out.files_inspected, ledger.filesRead, (path) => path)) {
    const inspected = namedPaths(out.files_inspected)
    const names = modifiedNames()
    for (const path of ledger.filesRead) {
      if (inspected.has(path) || names.has(path)) continue
      out.files_inspected.push(path)
      inspected.add(path)
      added++
    }
  }
  // Every request the ledger saw is there verbatim (repeats collapsed, counted where the merge added
  // them up); one the summary lacks is put back, in the user's order.
  const entries = shapedEntries(
    ledger.userRequests.map((r) => r.text),
    ledger.userRequests.map((r) => r.shape)
  )
  // An item that is one of these entries has its shape already (the extractive summary's all are).
  const known = new Map(entries.map((e) => [e.text, e.shape]))
  const present = new Set(out.user_requests.map((item) => known.get(item) ?? entryShape(item)))
  for (const entry of entries) {
    if (present.has(entry.shape)) continue
    out.user_requests.push(entry.text)
    present.add(entry.shape)
    added++
  }
  return { sections: out, added }
}
