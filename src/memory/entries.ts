import { sliceHead } from '../compaction/clip.js'
import {
  type Clip,
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
 * citing the messages it came from. Asks and answers verbatim (long ones as overlapping passages, so a
 * search ranks the passage that matches), commands with their outcome, errors by the lines that say
 * why, evidence (failing tests, error lines with file:line, test-run tallies) capped, files touched.
 * Whole tool outputs are never kept: not a stdout landfill.
 */

export const MEMORY_KINDS = ['ask', 'answer', 'command', 'error', 'evidence', 'file'] as const
export type MemoryKind = (typeof MEMORY_KINDS)[number]

export interface MemoryEntry {
  kind: MemoryKind
  text: string
  /** Indices, in the history as the request sent it, of the first and last message the entry came from. */
  from: number
  to: number
}

/** A passage of a long text: this many characters, the next one starting this much earlier than the end. */
export const PASSAGE_CHARS = 1_200
export const PASSAGE_OVERLAP = 200
/** Caps: one evidence line, the evidence of one output, and all entries of one compaction. */
export const EVIDENCE_LINE_CHARS = 300
export const EVIDENCE_PER_OUTPUT = 8
export const MAX_ENTRIES = 2_000

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
  const calls = new Map<string, { command: string; index: number }>()
  messages.forEach((m, k) => {
    const i = offset + k
    if (isPromptMessage(m)) {
      add('ask', userText(m), i)
      return
    }
    for (const b of blocksOf(m)) {
      if (m.role === 'assistant' && isTextBlock(b) && b.text.trim() !== '') add('answer', b.text, i)
      else if (isToolUse(b)) calls.set(b.id, { command: commandText(b.input, b.name), index: i })
      else if (isToolResult(b)) {
        const call = calls.get(b.tool_use_id)
        const output = toolResultText(b)
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

/** What the hard bound clipped from the kept tail: a clipped prompt whole (as an ask), a clipped output's evidence; redacted before it is cut, as readMemory's. */
export function clippedMemory(original: readonly Message[], clips: readonly Clip[], redactFirst: Redact = redact): MemoryEntry[] {
  const out: MemoryEntry[] = []
  for (const c of clips) {
    const keys = c.path.split('/').slice(3)
    let node: unknown = original[c.message_index]
    for (const k of keys) node = (node as Record<string, unknown> | undefined)?.[k]
    if (typeof node !== 'string') continue
    const text = redactFirst(node)
    if (c.kind === 'prompt') for (const p of passages(text)) out.push({ kind: 'ask', text: p, from: c.message_index, to: c.message_index })
    else if (c.kind === 'tool_result')
      for (const line of evidenceLines(text)) out.push({ kind: 'evidence', text: line, from: c.message_index, to: c.message_index })
    else if (c.kind === 'text') for (const p of passages(text)) out.push({ kind: 'answer', text: p, from: c.message_index, to: c.message_index })
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

/** The entries with every text redacted at once. */
export function redactMemory(entries: readonly MemoryEntry[], redactMany: RedactMany): MemoryEntry[] {
  const texts = redactMany(entries.map((e) => e.text))
  return entries.map((e, k) => ({ ...e, text: at(texts, k) }))
}
