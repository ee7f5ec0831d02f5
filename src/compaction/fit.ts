import { sliceHead } from './clip.js'
import { taskStatement } from './requests.js'
import { type SummaryHeader, formattedLength, headingLength, itemLength } from './summary-text.js'
import { CHARS_PER_TOKEN } from './tokens.js'
import { LIST_SECTIONS, type ListSection, type SummarySections, itemPath } from './sections.js'
import { at } from './at.js'

/**
 * Makes a summary fit its token budget by one priority list of stages, each shortening more of what
 * matters least: long items, then old entries of the long lists, then older requests (the newest is kept
 * whole longest). Files lose their descriptions first; the oldest are then left out and counted in one
 * line. Each stage starts from the full summary and is measured by one length function (formattedLength),
 * so the first stage that fits keeps the most.
 */
interface Stage {
  /** Longest item, in characters. */
  item: number
  /** Most entries kept of a list that is not files or requests (newest kept). */
  list: number
  /** Longest older request, and the newest request. */
  request: number
  newestRequest: number
  /** Keep only the path of a files entry. */
  bareFiles: boolean
  /** Most requests kept (newest), the rest counted in one line. */
  requests: number
  /** Longest task statement (the first real request): shortened last, from its end, never dropped. */
  task: number
  /** The files lists: all kept (shortened as above), the most newest that fit beside the rest, or none (counted). */
  files: 'all' | 'most' | 'none'
}

const STAGES: readonly Stage[] = [
  { item: Infinity, list: Infinity, request: Infinity, newestRequest: Infinity, bareFiles: false, requests: Infinity, task: Infinity, files: 'all' },
  // the user's words are worth more than long lists: those shrink first
  { item: 600, list: 20, request: Infinity, newestRequest: Infinity, bareFiles: false, requests: Infinity, task: Infinity, files: 'all' },
  { item: 160, list: 6, request: Infinity, newestRequest: Infinity, bareFiles: true, requests: Infinity, task: Infinity, files: 'all' },
  { item: 600, list: 20, request: 2_000, newestRequest: 8_000, bareFiles: false, requests: Infinity, task: 12_000, files: 'all' },
  { item: 300, list: 10, request: 600, newestRequest: 4_000, bareFiles: false, requests: Infinity, task: 8_000, files: 'all' },
  { item: 160, list: 6, request: 240, newestRequest: 2_000, bareFiles: false, requests: Infinity, task: 6_000, files: 'all' },
  { item: 120, list: 4, request: 120, newestRequest: 1_000, bareFiles: true, requests: 40, task: 4_000, files: 'all' },
  { item: 80, list: 2, request: 80, newestRequest: 600, bareFiles: true, requests: 12, task: 2_000, files: 'all' },
  { item: 60, list: 1, request: 60, newestRequest: 300, bareFiles: true, requests: 4, task: 1_000, files: 'all' },
  { item: 40, list: 0, request: 40, newestRequest: 200, bareFiles: true, requests: 1, task: 400, files: 'all' },
  // files are worth more than the words of a task whose title is the objective already
  { item: 40, list: 0, request: 40, newestRequest: 80, bareFiles: true, requests: 1, task: 80, files: 'all' },
  // the bare paths alone are over the budget: the newest files that fit beside the rest, the older counted
  { item: 40, list: 0, request: 40, newestRequest: 80, bareFiles: true, requests: 1, task: 80, files: 'most' },
  // the least a summary can say: a short objective, the newest request shortened, the files counted
  { item: 0, list: 0, request: 0, newestRequest: 80, bareFiles: true, requests: 1, task: 80, files: 'none' }
]

const FILE_SECTIONS: ReadonlySet<ListSection> = new Set(['files_modified', 'files_inspected'])
/** A failing test's entry is shortened to no less than this: its id and the start of its reason. */
const WORTH_ITEM = 160

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${sliceHead(text, max - 1)}…`
}

/**
 * The sections shortened as `stage` says; `task` is the index of the task statement among the requests,
 * if any; `files` makes the files lists (once per form, for every stage of one fit).
 */
function applyStage(s: SummarySections, stage: Stage, task: number | undefined, files: FilesAt): SummarySections {
  const out = { objective: shorten(s.objective, stage.files === 'none' ? 80 : Math.max(stage.item, 200)) } as SummarySections
  for (const key of LIST_SECTIONS) {
    const items = s[key]
    if (key === 'user_requests') {
      // The task statement stays, shortened from its end only and last; the newest requests after it.
      const others = items.map((r, i) => ({ r, i })).filter(({ i }) => i !== task)
      const keptCount = Math.min(others.length, Math.max(1, stage.requests - (task === undefined ? 0 : 1)))
      const dropped = others.length - keptCount
      const newest = others.length - 1
      const kept = others
        .slice(others.length - keptCount)
        .map(({ r, i }) => ({ i, text: shorten(r, i === others[newest]?.i ? stage.newestRequest : stage.request) }))
      if (task !== undefined) kept.unshift({ i: task, text: shorten(at(items, task), stage.task) })
      kept.sort((a, b) => a.i - b.i)
      const texts = kept.map((k) => k.text)
      out[key] = dropped > 0 ? [`(${dropped} older requests shortened away to fit the summary budget)`, ...texts] : texts
    } else if (FILE_SECTIONS.has(key)) {
      out[key] = files(key, stage)
    } else if (key === 'failing_tests_and_errors') {
      // Worth first: every failing test and every run that showed a failure stays (shortened); of the
      // other entries, the newest as the stage allows.
      const worth = (i: string): boolean => i.startsWith('FAILING ') || /^`[^`]*` (?:exited \d+ but )?printed: /.test(i)
      const others = items.filter((i) => !worth(i))
      const keptOthers = new Set(others.slice(Math.max(0, others.length - stage.list)))
      out[key] = items.filter((i) => worth(i) || keptOthers.has(i)).map((i) => shorten(i, worth(i) ? Math.max(stage.item, WORTH_ITEM) : stage.item))
    } else {
      out[key] = items.slice(Math.max(0, items.length - stage.list)).map((i) => shorten(i, stage.item))
    }
  }
  return out
}

type FilesAt = (key: ListSection, stage: Stage) => string[]

/**
 * The files lists as each stage has them, each made once: the bare paths are the same in every stage
 * that keeps only paths, and a stage whose item limit no entry reaches keeps the list as it is. (A
 * history of 100,000 files would otherwise have its lists rebuilt in every stage.)
 */
function filesAt(s: SummarySections): FilesAt {
  const made = new Map<string, string[]>()
  const longest = new Map([...FILE_SECTIONS].map((key) => [key, s[key].reduce((n, i) => Math.max(n, i.length), 0)]))
  return (key, stage) => {
    const items = s[key]
    const form = stage.bareFiles ? 'bare' : (longest.get(key) ?? 0) <= stage.item ? 'whole' : `item ${stage.item}`
    if (form === 'whole') return items
    const id = `${key} ${form}`
    let list = made.get(id)
    if (list === undefined) {
      list = items.map((i) => (stage.bareFiles ? itemPath(i) : shorten(i, stage.item)))
      made.set(id, list)
    }
    return list
  }
}

/** The line that counts the files left out. */
function droppedFilesLine(dropped: number): string {
  return `(${dropped} more files, older, left out to fit the summary budget)`
}

/** How many older files each files list had cut before the fit (boundFiles); the fit counts them with its own. */
export type OmittedFiles = Partial<Record<ListSection, number>>

/**
 * The newest files of each list that any fit within `maxTokens` could keep, the older ones counted. Every
 * item takes at least 3 characters of the text form (its "- " and its newline), so a list of more items
 * than a third of the budget's characters never fits and the fit keeps only its newest, fewer than that.
 * Cutting such a list before the summary is redacted and fitted changes nothing in the fitted summary
 * (fitSections with the counts), and bounds that work by the summary's budget instead of by the
 * history's files: 50,000 files read were redacted and measured whole, several times, for a summary that
 * keeps a few thousand at most.
 */
export function boundFiles(s: SummarySections, maxTokens: number): { sections: SummarySections; omitted: OmittedFiles } {
  const most = Math.floor((Math.max(0, maxTokens) * CHARS_PER_TOKEN) / MIN_ITEM_CHARS)
  const omitted: OmittedFiles = {}
  let out = s
  for (const key of FILE_SECTIONS) {
    const items = s[key]
    if (items.length <= most) continue
    if (out === s) out = { ...s }
    out[key] = items.slice(items.length - most)
    omitted[key] = items.length - most
  }
  return { sections: out, omitted }
}

/** The fewest characters an item takes in the text form (an empty one: "- " and a newline). */
const MIN_ITEM_CHARS = 3

/** Only the newest `keep` entries of each files list, the rest (and those cut before, `omitted`) counted in one line. */
function keepNewestFiles(s: SummarySections, keep: number, omitted: OmittedFiles): SummarySections {
  const out = { ...s }
  for (const key of FILE_SECTIONS) {
    const items = s[key]
    const cut = items.length - Math.min(keep, items.length)
    const dropped = cut + (omitted[key] ?? 0)
    out[key] = dropped > 0 ? [droppedFilesLine(dropped), ...items.slice(cut)] : items
  }
  return out
}

/**
 * The most newest files of each list (keepNewestFiles) that fit within `maxChars` of text beside the
 * rest of `s`, found from the lengths of the items summed from the newest, only as far as they can fit
 * (no candidate is built, and a list's older items are never read).
 */
function mostFilesWithin(s: SummarySections, maxChars: number, header: SummaryHeader, omitted: OmittedFiles): number {
  const rest = formattedLength({ ...s, files_modified: [], files_inspected: [] }, header)
  const lists = [...FILE_SECTIONS].map((key) => ({ items: s[key], omitted: omitted[key] ?? 0, heading: s[key].length > 0 ? headingLength(key) : 0 }))
  const most = Math.max(0, ...lists.map((l) => l.items.length))
  // `length`: the rest, the headings and the newest `keep` items of each list. It only grows, so once it is
  // over no larger keep fits; each list's count line (which shrinks as more are kept) is added at every
  // keep, so the largest keep that fits is found even where the whole is not monotone.
  const headings = lists.reduce((n, l) => n + l.heading, 0)
  let best = 0
  let length = rest + headings
  for (let keep = 1; keep <= most; keep++) {
    for (const l of lists) if (keep <= l.items.length) length += itemLength(at(l.items, l.items.length - keep))
    if (length > maxChars) break
    const whole = lists.reduce((n, l) => {
      const dropped = Math.max(0, l.items.length - keep) + l.omitted
      return n + (dropped > 0 ? itemLength(droppedFilesLine(dropped)) : 0)
    }, length)
    if (whole <= maxChars) best = keep
  }
  return best
}

/**
 * The sections shortened until their text form (formatSummary with this header) is within `maxTokens`:
 * the first stage of STAGES that fits, else the last, which holds the least a summary can say. Files are
 * dropped last, oldest first, and only when the bare paths alone are over the budget; the bound holds
 * whatever the history (a summary larger than its share would break the budget). `omitted` counts files
 * cut from the lists before (boundFiles): they are counted with those the fit drops.
 */
export function fitSections(sections: SummarySections, maxTokens: number, header: SummaryHeader, omitted: OmittedFiles = {}): SummarySections {
  const fits = (s: SummarySections): boolean => Math.ceil(formattedLength(s, header) / CHARS_PER_TOKEN) <= maxTokens
  const anyOmitted = Object.values(omitted).some((n) => n > 0)
  const files = filesAt(sections)
  // The first stage shortens nothing, so it needs no task statement; the others find it once.
  let task: number | undefined
  let taskFound = false
  let candidate = sections
  for (const [k, stage] of STAGES.entries()) {
    if (k > 0 && !taskFound) {
      task = taskStatement(sections.user_requests)?.index
      taskFound = true
    }
    const shortened = applyStage(sections, stage, task, files)
    if (stage.files === 'all') candidate = anyOmitted ? keepNewestFiles(shortened, Infinity, omitted) : shortened
    else if (stage.files === 'most') candidate = keepNewestFiles(shortened, mostFilesWithin(shortened, maxTokens * CHARS_PER_TOKEN, header, omitted), omitted)
    else candidate = keepNewestFiles(shortened, 0, omitted)
    if (fits(candidate)) return candidate
  }
  return candidate
}
