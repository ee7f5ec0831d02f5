import { sliceHead } from '../compaction/clip.js'
import {
  type Clip,
  type ClipKind,
  type Message,
  type Redact,
  type RedactMany,
  blocksOf,
  exitCodeOf,
  isPromptMessage,
  isTextBlock,
  isToolResult,
  isToolUse,
  redact,
  testResults,
  toolResultText,
  userText,
  whyLines
} from '../compaction/index.js'
import { at } from '../compaction/index.js'

/**
 * The cold layer's pure part: what a compaction removed, as entries a search can find again, each
 * citing the messages (and the lines) it came from. Everything removed is kept whole, in passages of
 * bounded size cut at line ends: asks, answers, every tool output (`output`) and every long tool input
 * (`call`). Beside them, a digest that ranks well because each entry is short and says one thing:
 * commands with their outcome, errors by the lines that say why, evidence (failing tests, error lines
 * with file:line, test-run tallies), files touched. A session's store bounds what it keeps by bytes.
 */

export const MEMORY_KINDS = ['ask', 'answer', 'output', 'call', 'command', 'error', 'evidence', 'file'] as const
export type MemoryKind = (typeof MEMORY_KINDS)[number]

export interface MemoryEntry {
  kind: MemoryKind
  text: string
  /** Indices, in the history as the request sent it, of the first and last message the entry came from. */
  from: number
  to: number
  /** Lines (1-based, inclusive) of the text the entry is a passage of: a passage of a long text only. */
  lines?: [number, number]
}

/** A passage of a long text: this many characters, the next one starting this much earlier than the end. */
export const PASSAGE_CHARS = 1_200
export const PASSAGE_OVERLAP = 200
/** Caps: one evidence line, the evidence of one output, and all entries of one compaction. */
export const EVIDENCE_LINE_CHARS = 300
export const EVIDENCE_PER_OUTPUT = 8
export const MAX_ENTRIES = 50_000
/** A tool input's field kept whole (as `call` passages) when it is at least this long: a file written, an edit. */
const CALL_FIELD_CHARS = 200

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff
const isLowSurrogate = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff

/** A passage of a text: its exact characters and the lines (1-based, inclusive) they are. */
export interface Passage {
  text: string
  lines: [number, number]
}

/**
 * A text as passages of at most `max` characters cut at line ends, each citing its lines; where a text
 * must be cut, the next passage begins with the last lines (at most `overlap` characters) of the one
 * before, so a fact on the edge is whole in one of them. A line longer than `max` is cut in pieces of its
 * own (never inside a surrogate pair), overlapping by `overlap` characters. Passages of blanks only are
 * left out; every other character of the text is in some passage, as it was.
 */
export function linePassages(text: string, max = PASSAGE_CHARS, overlap = PASSAGE_OVERLAP): Passage[] {
  const lines = text.split('\n')
  const out: Passage[] = []
  const push = (t: string, first: number, last: number): void => {
    if (t.trim() !== '') out.push({ text: t, lines: [first, last] })
  }
  let start = 0
  while (start < lines.length) {
    const line = lines[start] ?? ''
    if (line.length > max) {
      for (let pos = 0; pos < line.length;) {
        const piece = sliceHead(line.slice(pos), max)
        push(piece, start + 1, start + 1)
        if (pos + piece.length >= line.length) break
        pos += Math.max(1, piece.length - overlap)
        // never begin inside a surrogate pair
        if (isLowSurrogate(line.charCodeAt(pos)) && isHighSurrogate(line.charCodeAt(pos - 1))) pos++
      }
      start++
      continue
    }
    let end = start
    let chars = line.length
    while (end + 1 < lines.length && chars + 1 + (lines[end + 1] ?? '').length <= max) chars += 1 + (lines[++end] ?? '').length
    push(lines.slice(start, end + 1).join('\n'), start + 1, end + 1)
    if (end + 1 >= lines.length) break
    // the next passage takes back the last lines of this one, within `overlap`, and moves on by one at least
    let back = end + 1
    let shared = 0
    while (back - 1 > start && shared + (lines[back - 1] ?? '').length + 1 <= overlap) shared += (lines[--back] ?? '').length + 1
    start = (lines[end + 1] ?? '').length > max ? end + 1 : back
  }
  return out
}

/** A long text as overlapping passages, cut at line or word ends where one is near. */
export function passages(text: string): string[] {
  const t = text.trim()
  if (t.length <= PASSAGE_CHARS) return t ? [t] : []
  const out: string[] = []
  let start = 0
  while (start < t.length) {
    let end = Math.min(t.length, start + PASSAGE_CHARS)
    if (end < t.length) {
      const cut = Math.max(t.lastIndexOf('\n', end), t.lastIndexOf(' ', end))
      if (cut > start + PASSAGE_CHARS / 2) end = cut
    }
    out.push(t.slice(start, end).trim())
    if (end >= t.length) break
    start = Math.max(start + 1, end - PASSAGE_OVERLAP)
  }
  return out
}

/** Lines of an output worth keeping as evidence: failing tests, errors with a file:line, test-run tallies. */
const EVIDENCE = [
  // an error or a frame with file:line (a non-blank before the dot: `\S+` there found the same lines, retried
  // from every start of a long run of non-blanks)
  /\S\.\w{1,5}:\d+(?::\d+)?[:,) ]/,
  /\b\d+ (?:passed|failed|errors?|skipped)\b/i, // a test run's tally
  /^(?:FAILED|PASSED|ERROR|FAIL|ok|not ok)\b|::\w+ (?:PASSED|FAILED)|--- (?:FAIL|PASS):/
]

function evidenceLines(output: string): string[] {
  const out: string[] = []
  for (const line of output.split('\n')) {
    const t = line.trim()
    if (t.length < 8 || t.length > 4_000) continue
    if (EVIDENCE.some((p) => p.test(t))) out.push(t.length > EVIDENCE_LINE_CHARS ? `${sliceHead(t, EVIDENCE_LINE_CHARS)}…` : t)
    if (out.length >= EVIDENCE_PER_OUTPUT * 4) break
  }
  // the last lines of an output say most (the tally, the final failure); keep those
  return [...new Set(out)].slice(-EVIDENCE_PER_OUTPUT)
}

function commandText(input: unknown, name: string): string {
  const fields = (input ?? {}) as Record<string, unknown>
  for (const key of ['command', 'cmd', 'script', 'file_path', 'path', 'pattern', 'query']) {
    const v = fields[key]
    if (typeof v === 'string' && v.trim() !== '') return key === 'command' || key === 'cmd' || key === 'script' ? v.trim() : `${name} ${v.trim()}`
  }
  return name
}

/** The long string fields of a tool's input (a file's new content, an edit's text), whole, in their order. */
function longFields(input: unknown): string[] {
  if (input === null || typeof input !== 'object') return []
  return Object.values(input as Record<string, unknown>).filter((v): v is string => typeof v === 'string' && v.length >= CALL_FIELD_CHARS)
}

/** The most of a command an entry keeps (a heredoc or an inline script runs long). */
const COMMAND_CHARS = 2_000
/** An output that says something went wrong, whatever the command's status. */
const SIGNAL = /\b(?:[Ee]rror|ERROR|[Ee]xception|Traceback|[Ff]ailed|FAILED|[Ff]ailure|[Ff]atal|FATAL|panic)\b|[a-z](?:Error|Exception)\b/
/** A line that says nothing failed (`0 errors`, `no failures`). */
const NO_FAILURE = /\b(?:0|no) (?:errors?|failures?|failed)\b/i

/** A command as it was run, every line of it, at most `max` characters. */
function wholeCommand(text: string, max: number): string {
  const t = text.trim()
  return t.length > max ? `${sliceHead(t, max - 1)}…` : t
}

function firstLine(text: string, max: number): string {
  const line = (text.split('\n', 1)[0] ?? '').trim()
  return line.length > max ? `${sliceHead(line, max - 1)}…` : line
}

/**
 * The entries of a span: `messages` are the removed messages, `offset` the index of the first of them
 * in the request. Each text is redacted (`redactFirst`) before it is cut into passages, so that no secret
 * is cut in two at a passage's edge and kept half raw; the service redacts every passage again, with its
 * full rules, before anything is kept.
 */
export function readMemory(
  messages: readonly Message[],
  offset: number,
  files: { modified: string[]; read: string[] },
  redactFirst: Redact = redact
): MemoryEntry[] {
  const out: MemoryEntry[] = []
  const add = (kind: MemoryKind, text: string, from: number, to = from): void => {
    for (const p of passages(redactFirst(text))) out.push({ kind, text: p, from, to })
  }
  /** A text kept whole, as passages that cite their lines. */
  const whole = (kind: MemoryKind, text: string, from: number, to = from): void => {
    for (const p of linePassages(redactFirst(text))) out.push({ kind, text: p.text, from, to, lines: p.lines })
  }
  const calls = new Map<string, { command: string; index: number }>()
  messages.forEach((m, k) => {
    const i = offset + k
    if (isPromptMessage(m)) {
      whole('ask', userText(m), i)
      return
    }
    for (const b of blocksOf(m)) {
      if (m.role === 'assistant' && isTextBlock(b) && b.text.trim() !== '') whole('answer', b.text, i)
      else if (isToolUse(b)) {
        calls.set(b.id, { command: commandText(b.input, b.name), index: i })
        for (const field of longFields(b.input)) whole('call', field, i)
      } else if (isToolResult(b)) {
        const call = calls.get(b.tool_use_id)
        const output = toolResultText(b)
        whole('output', output, call?.index ?? i, i)
        const exit = exitCodeOf(output)
        const failed = b.is_error === true || (exit !== undefined && exit !== 0)
        const from = call?.index ?? i
        // the whole command (a multi-line one is found by any of its lines), the first line where it is named
        const command = call ? wholeCommand(call.command, COMMAND_CHARS) : 'a tool call'
        const named = call ? firstLine(call.command, 400) : 'a tool call'
        add('command', `${command} → ${failed ? 'failed' : 'ok'}${exit !== undefined ? ` (exit ${exit})` : ''}`, from, i)
        // Why a call failed; and what a run printed of an error or exception though it succeeded (a script that
        // caught it, a test runner that prints failures and exits 0) is evidence too.
        if (failed || SIGNAL.test(output)) {
          const why = whyLines(output, 4).filter((l) => failed || !NO_FAILURE.test(l))
          if (why.length > 0) add(failed ? 'error' : 'evidence', `${named} ${failed ? 'failed' : 'printed'}: ${why.join(' | ')}`, from, i)
        }
        for (const t of testResults(output).filter((r) => r.status === 'failed'))
          add('evidence', `failing test ${t.id}${t.reason ? ` — ${t.reason}` : ''}`, from, i)
        for (const line of evidenceLines(output)) add('evidence', line, from, i)
      }
    }
  })
  const last = offset + Math.max(0, messages.length - 1)
  for (const f of files.modified) out.push({ kind: 'file', text: `modified ${f}`, from: offset, to: last })
  for (const f of files.read) out.push({ kind: 'file', text: `read ${f}`, from: offset, to: last })
  return dedupeAdjacent(out).slice(-MAX_ENTRIES)
}

/** The cold layer's kind of each clipped text (a thinking block is the model's own, not kept). */
const CLIP_KIND: Readonly<Record<ClipKind, MemoryKind | undefined>> = {
  prompt: 'ask',
  text: 'answer',
  tool_result: 'output',
  tool_input: 'call',
  thinking: undefined
}

/** What the hard bound clipped from the kept tail, whole (a clipped output's evidence beside it); redacted before it is cut, as readMemory's. */
export function clippedMemory(original: readonly Message[], clips: readonly Clip[], redactFirst: Redact = redact): MemoryEntry[] {
  const out: MemoryEntry[] = []
  for (const c of clips) {
    const keys = c.path.split('/').slice(3)
    let node: unknown = original[c.message_index]
    for (const k of keys) node = (node as Record<string, unknown> | undefined)?.[k]
    if (typeof node !== 'string') continue
    const text = redactFirst(node)
    const kind = CLIP_KIND[c.kind]
    if (kind === undefined) continue
    for (const p of linePassages(text)) out.push({ kind, text: p.text, from: c.message_index, to: c.message_index, lines: p.lines })
    if (c.kind === 'tool_result') for (const line of evidenceLines(text)) out.push({ kind: 'evidence', text: line, from: c.message_index, to: c.message_index })
  }
  return out
}

/** Kinds whose identical entries are one fact seen again (a command rerun, the same failure twice). */
const REPEATABLE: ReadonlySet<MemoryKind> = new Set(['command', 'error', 'evidence'])

/**
 * A command run five times, or a failure seen again, is one entry whose citation spans every place it
 * came from, with how many times in its text; asks and answers stay where they were said.
 */
function dedupeAdjacent(entries: MemoryEntry[]): MemoryEntry[] {
  const byText = new Map<string, { entry: MemoryEntry; times: number }>()
  const out: MemoryEntry[] = []
  for (const e of entries) {
    if (!REPEATABLE.has(e.kind)) {
      out.push(e)
      continue
    }
    const key = `${e.kind}\n${e.text}`
    const seen = byText.get(key)
    if (seen) {
      seen.entry.from = Math.min(seen.entry.from, e.from)
      seen.entry.to = Math.max(seen.entry.to, e.to)
      seen.times++
      continue
    }
    const entry = { ...e }
    byText.set(key, { entry, times: 1 })
    out.push(entry)
  }
  for (const { entry, times } of byText.values()) if (times > 1) entry.text = `${entry.text} (seen ${times} times)`
  return out
}

/**
 * What a clearing removed, as the cold layer keeps it: each cleared call's line and whole output (its
 * `evidence`), redacted before it is cut, in passages citing their lines (the call's line is line 1).
 */
export function clearedEntries(uses: readonly { message: number; evidence: string }[], redactFirst: Redact = redact): MemoryEntry[] {
  return uses.flatMap((u) =>
    linePassages(redactFirst(u.evidence)).map((p) => ({ kind: 'output' as const, text: p.text, from: u.message, to: u.message, lines: p.lines }))
  )
}

/** The entries with every text redacted at once. */
export function redactMemory(entries: readonly MemoryEntry[], redactMany: RedactMany): MemoryEntry[] {
  const texts = redactMany(entries.map((e) => e.text))
  return entries.map((e, k) => ({ ...e, text: at(texts, k) }))
}
