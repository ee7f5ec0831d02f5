import { sliceHead } from './clip.js'
/**
 * What a user message says as a request: the task it states, or nothing but chatter. Agent harnesses
 * and clients put much into user messages that no person asked (slash-command echoes and their output,
 * transcript markers, uploaded-file listings, demonstrations, format complaints repeated every turn);
 * the objective must come from the real request, and repeats must not fill the summary.
 */
import { at } from './at.js'

/** Lines a client or harness writes, not the user: a slash command's echo and output, transcript markers. */
const ECHO_LINE = /^(?:\/[\w:-]+(?:\s.*)?(?:is running…?)?|⎿.*|\[[^\]]*\]|<\/?[\w-]+>|Interrupted by user)$/
/** A line that is only a path or a file listing entry. */
const PATH_LINE = /^(?:[~.]?\/[\w.@+/-]*|[\w.-]+\/[\w./@+-]+)$/
/** A harness's file listing, which is no part of what was asked. */
const UPLOADED_FILES = /<uploaded_files>[^<]*<\/uploaded_files>/g
/** Where a worked example (a demonstration of another task) begins and ends; a line of its own each. */
const DEMO_START = /^-{2,}\s*DEMONSTRATION\s*-{2,}$/m
const DEMO_END = /^-{2,}\s*END OF DEMONSTRATION\s*-{2,}$/m

const STOP_WORDS = new Set(
  'a an and are as at be but by can do does for from has have i if in into is it its let me my no not of on or our so that the their then there this to us was we were what when where which will with you your please just also now here'.split(
    ' '
  )
)

/** The words of a text that carry content: lower case, no stop words, three letters or more. */
export function contentWords(text: string): Set<string> {
  const words = new Set<string>()
  for (const w of text.toLowerCase().match(/[\p{L}\p{N}_]{3,}/gu) ?? []) if (!STOP_WORDS.has(w)) words.add(w)
  return words
}

/** The head of a request without the blocks a harness wraps around other material (file listings, demonstrations). */
function withoutHarnessBlocks(text: string): string {
  let body = text.length > READ_CHARS ? sliceHead(text, READ_CHARS) : text
  // A demonstration and the text that introduces it go: the request is what follows its end.
  const start = DEMO_START.exec(body)
  const end = start ? DEMO_END.exec(body.slice(start.index)) : null
  if (start && end) body = body.slice(start.index + end.index + end[0].length)
  return body.replace(UPLOADED_FILES, '')
}

/** Whether a request says anything once echoes and harness material are out (its first line often tells). */
export function saysAnything(text: string): boolean {
  const first = text.trimStart().split('\n', 1)[0]?.trim() ?? ''
  if (first !== '' && !ECHO_LINE.test(first) && !PATH_LINE.test(first) && !/^<|DEMONSTRATION/i.test(first)) return true
  return requestBody(text) !== ''
}

/** The request with harness material and echo lines taken out; what remains is what was asked. */
export function requestBody(text: string): string {
  return withoutHarnessBlocks(text)
    .split('\n')
    .filter((line) => {
      const t = line.trim()
      return t !== '' && !ECHO_LINE.test(t) && !PATH_LINE.test(t)
    })
    .join('\n')
    .trim()
}

/** How a collapsed entry says how often its request came. */
export const REPEAT_SUFFIX = / \(×(\d+)(, numbers varied)?\)$/

/** A request's shape with its numbers left out, so that "found 2 actions" and "found 3 actions" are one. */
export function requestShape(text: string): string {
  // The head says what a request is; a long one is told apart by its length as well (added after the
  // numbers are left out, else it would be left out with them). One pass: each run of digits becomes
  // `#`, each run of blanks one space, blanks at either end go (what \d+, \s+ and trim would do).
  const long = text.length > READ_CHARS
  const end = long ? READ_CHARS : text.length
  let out = ''
  let i = 0
  while (i < end && isBlank(text.charCodeAt(i))) i++
  let plain = i
  while (i < end) {
    const c = text.charCodeAt(i)
    if (isDigit(c)) {
      out += `${text.slice(plain, i)}#`
      do i++
      while (i < end && isDigit(text.charCodeAt(i)))
      plain = i
    } else if (isBlank(c)) {
      out += text.slice(plain, i)
      do i++
      while (i < end && isBlank(text.charCodeAt(i)))
      if (i < end) out += ' '
      plain = i
    } else i++
  }
  out += text.slice(plain, end)
  return long ? `${out}…${text.length}` : out
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57
}

/** The characters of JavaScript's \s. */
function isBlank(c: number): boolean {
  if (c === 32 || (c >= 9 && c <= 13)) return true
  if (c < 0xa0) return false
  return (
    c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  )
}

/** How much of a request is read to classify it: a task is stated at the start, and requests run to megabytes. */
const READ_CHARS = 20_000

/** Where an issue or pull request states its title inside a request, as the harnesses and trackers write it. */
const TITLE_AFTER = [
  /<pr_description>\s*(?:Consider the following PR description:\s*)?\n\s*(?:#+\s*)?(.+)/i,
  /(?:PR|pull request) description:\s*\n\s*(?:<pr_description>\s*\n\s*)?(?:#+\s*)?(.+)/i,
  /^ISSUE:\s*\n\s*(?:#+\s*)?(.+)/im,
  /^(?:title|issue title|summary):\s*(.+)/im
]

/** A word every TITLE_AFTER pattern needs. */
const TITLE_HINT = /pr_description|description:|^issue:|^(?:title|issue title|summary):/im

/** The title of the issue or pull request a request carries, when it carries one. */
export function requestTitle(text: string): string | undefined {
  if (!TITLE_HINT.test(text)) return undefined // one look: most requests state no issue or PR
  const head = withoutHarnessBlocks(text)
  for (const pattern of TITLE_AFTER) {
    const m = pattern.exec(head)
    if (!m || m[1] === undefined) continue
    // the title is the first line after the pattern that says something: a label or a tag before it is passed over
    const rest = head.slice(m.index + m[0].length - m[1].length, m.index + m[0].length + 2_000).split(/\r?\n/)
    let k = 0
    while (k < rest.length - 1 && introduces(rest[k] ?? '', rest.slice(k + 1))) k++
    const title = (rest[k] ?? '').replace(INLINE_LABEL, '').replace(QUOTE_MARK, '').trim()
    if (title && !TAG_LINE.test(title) && !LABEL_LINE.test(title) && contentWords(title).size > 0) return title
  }
  return undefined
}

/**
 * Requests that are chatter: nothing left once echoes and harness material are out, a bare greeting
 * or acknowledgement, or a request the span repeats (a person rarely says the same thing twice; a
 * harness's format complaint says it every turn).
 */
export function isChatter(text: string, repeats = 1): boolean {
  if (repeats > 1 || REPEAT_SUFFIX.test(text)) return true
  return !hasContentWords(requestBody(text), 2)
}

/** Whether a text has at least `n` distinct content words; stops reading as soon as it has. */
function hasContentWords(text: string, n: number): boolean {
  const seen = new Set<string>()
  const word = /[\p{L}\p{N}_]{3,}/gu
  for (let m = word.exec(text); m !== null; m = word.exec(text)) {
    const w = m[0].toLowerCase()
    if (!STOP_WORDS.has(w)) seen.add(w)
    if (seen.size >= n) return true
  }
  return false
}

/** A line that only labels what follows (`**Issue Text**`, `## Task`, `Problem statement:`: four words at most), not a request. */
const LABEL_LINE = /^[ \t]*(?:#{1,6}[ \t]+[^\n]{1,60}|(?:\*\*|__)[^*_\n]{1,60}(?:\*\*|__):?|[A-Z][\w-]*(?: [\w-]+){0,3}:)[ \t]*$/

/** A line that only opens or closes a tag a harness wraps the task in (`<issue_description>`, `</pr>`). */
const TAG_LINE = /^[ \t]*<\/?[\w-]{1,40}>[ \t]*$/
/** A line that points at the statement that follows it ("Consider the following issue description:", "Here is the task:"). */
const POINTER_LINE =
  /\b(?:following|below|here is|here's)\b[^\n:]{0,40}\b(?:issue|description|task|problem|statement|pr|pull request|request|report|ticket|bug)s?\b[^\n:]{0,20}:[ \t]*$/i
/** A label that opens a line before what it labels (`**Issue Text**`, `**Title**:`, `Issue Text:`: its words capitalized). */
const INLINE_LABEL = /^[ \t]*(?:(?:\*\*|__)[^*_\n]{1,40}(?:\*\*|__):?|[A-Z][\w-]*(?: [A-Z][\w-]*){0,2}:)[ \t]+(?=\S)/
/** A quotation's mark at a line's start. */
const QUOTE_MARK = /^[ \t]*>[ \t]?/

/** Whether a line only introduces what the lines after it say: blank, a label, a tag, or a pointer to them (with something after it). */
function introduces(line: string, after: readonly string[]): boolean {
  if (line.trim() === '' || LABEL_LINE.test(line) || TAG_LINE.test(line)) return true
  return POINTER_LINE.test(line) && after.some((l) => l.trim() !== '' && !LABEL_LINE.test(l) && !TAG_LINE.test(l))
}

/**
 * The opening of a text as a task: its first complete instruction, on one line, at most `max` characters. What
 * only introduces it is passed over (labels and headings, a harness's tags, a line pointing at what follows, a
 * label that opens its line); sentences are taken until they say enough (at least 60 characters and five
 * content words), so that "yes. add it. we should review all the stories" is not cut to "yes. add it.".
 */
function lead(text: string, max: number): string {
  const lines = text.split(/\r?\n/)
  let first = 0
  while (first < lines.length - 1 && introduces(lines[first] ?? '', lines.slice(first + 1))) first++
  const opening = (lines[first] ?? '').replace(INLINE_LABEL, '').replace(QUOTE_MARK, '')
  const flat = [opening, ...lines.slice(first + 1)]
    .join('\n')
    .slice(0, max * 4)
    .replace(/\s+/g, ' ')
    .trim()
  // A sentence ends at . ! or ? before a space; a dot inside a name (`day-004.md`, `Header.fromstring`) does not end it.
  const sentences = flat.split(/(?<=[.!?])\s+/)
  let out = ''
  for (const sentence of sentences) {
    out = out ? `${out} ${sentence.trim()}` : sentence.trim()
    if (out.length >= 60 && contentWords(out).size >= 5) break
    if (out.length > max) break
  }
  return out.length > max ? `${sliceHead(out, max - 1).trimEnd()}…` : out
}

export interface TaskStatement {
  /** Index of the request in the list it was chosen from. */
  index: number
  objective: string
}

/**
 * The task the requests state: the first real request (not chatter), as its issue or PR title when it
 * carries one, else its first sentence or two. Undefined when every request is chatter.
 */
export function taskStatement(requests: readonly string[], shapes: readonly string[] = requests.map(requestShape)): TaskStatement | undefined {
  const counts = new Map<string, number>()
  for (const shape of shapes) counts.set(shape, (counts.get(shape) ?? 0) + 1)
  for (let index = 0; index < requests.length; index++) {
    const text = at(requests, index)
    if (isChatter(text, counts.get(at(shapes, index)))) continue
    const title = requestTitle(text)
    return { index, objective: title ? lead(title, 300) : lead(requestBody(text), 300) }
  }
  return undefined
}

/**
 * The user's requests as a summary lists them: verbatim, oldest first, but a request repeated with
 * only its numbers changed is listed once, where it last appeared, with how many times it came.
 */
export function requestEntries(requests: readonly string[], shapes: readonly string[] = requests.map(requestShape)): string[] {
  return shapedEntries(requests, shapes).map((e) => e.text)
}

/** A request as the summary lists it, with the shape of what it says (its count left out). */
export interface ShapedEntry {
  text: string
  shape: string
}

/** The shape of a summary's request entry: that of the request, its count left out. */
export function entryShape(entry: string): string {
  const m = entry.endsWith(')') ? REPEAT_SUFFIX.exec(entry) : null
  return requestShape(m ? entry.slice(0, m.index) : entry)
}

/** requestEntries with each entry's shape, computed once: from the request's own where the entry is the request. */
export function shapedEntries(requests: readonly string[], shapes: readonly string[] = requests.map(requestShape)): ShapedEntry[] {
  const seen = new Map<string, { count: number; last: number; texts: Set<string> }>()
  requests.forEach((r, i) => {
    const shape = at(shapes, i)
    const entry = seen.get(shape) ?? { count: 0, last: i, texts: new Set<string>() }
    entry.count++
    entry.last = i
    entry.texts.add(r.trim())
    seen.set(shape, entry)
  })
  const out: ShapedEntry[] = []
  requests.forEach((r, i) => {
    const shape = at(shapes, i)
    const entry = seen.get(shape)
    if (entry === undefined || entry.last !== i) return
    const text = entry.count > 1 ? `${r.trim()} (×${entry.count}${entry.texts.size > 1 ? ', numbers varied' : ''})` : r
    // an entry that is the request as sent has the request's shape (one ending in `)` may end as a count does)
    out.push({ text, shape: entry.count === 1 && !r.endsWith(')') ? shape : entryShape(text) })
  })
  return out
}

/** A request that asks for work: not chatter, and it says something (four words of content or more). */
export function isTaskLike(text: string, repeats = 1): boolean {
  if (isChatter(text, repeats)) return false
  return hasContentWords(requestTitle(text) ?? requestBody(text), 4)
}

/**
 * The task the work is on at the end of the requests: the latest task-like one (as its issue or PR title
 * when it carries one, else its first sentence or two). A run whose task was stated as an issue or PR
 * keeps it until another issue or PR is stated: what follows such a statement is the harness's feedback,
 * not a new task. Undefined when no request is task-like.
 */
export function currentTask(requests: readonly string[], shapes: readonly string[] = requests.map(requestShape)): TaskStatement | undefined {
  const first = taskStatement(requests, shapes)
  const counts = new Map<string, number>()
  for (const shape of shapes) counts.set(shape, (counts.get(shape) ?? 0) + 1)
  const titled = first !== undefined && requestTitle(at(requests, first.index)) !== undefined
  for (let index = requests.length - 1; index >= 0; index--) {
    const text = at(requests, index)
    const title = requestTitle(text)
    if (titled ? title === undefined : !isTaskLike(text, counts.get(at(shapes, index)))) continue
    return { index, objective: title ? lead(title, 300) : lead(requestBody(text), 300) }
  }
  return first
}
