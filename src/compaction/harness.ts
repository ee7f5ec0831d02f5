/**
 * The user's words told from the harness's. Agents put much into user messages that no person typed:
 * instructions wrapped in tags, worked examples, file listings, reminders, format complaints repeated
 * every turn. None of it is recognized by its wording: by its markup (an element whose tag names
 * instructions, examples, context…), by repetition within the session, and by text the same key's other
 * conversations sent too (their lines' fingerprints, never their text, are what the service remembers).
 * What is left of a request is the user's, verbatim; each piece of harness text is named once, in a line.
 */
import { sliceHead } from './clip.js'

/** A line is fingerprinted when it is at least this long: shorter ones ("Thanks!", "```") say nothing of a harness. */
export const FINGERPRINT_MIN_CHARS = 24

/** Text other conversations sent, by fingerprint: given by the service, which sees many sessions. */
export type CommonText = (fingerprint: string) => boolean

/** What a piece of a request is, when it is not the user's. */
export type HarnessKind = 'markup' | 'repeated' | 'common'

export interface RequestPiece {
  text: string
  /** Undefined: the user's own words. */
  harness?: HarnessKind
  /** The element's tag, for markup. */
  tag?: string
  /** Its fingerprint: the same piece in another request of the span has the same one. */
  fingerprint: string
}

/** Words in a tag that say the element holds a harness's material, not what the user asked. */
const HARNESS_TAG_WORD =
  /(?:^|[-_])(?:system|reminder|context|environment|instructions?|rules|memory|guidelines?|policy|policies|examples?|format|demonstrations?|uploaded|files|caveat|hints?|tips|stdout|stderr|workflow|setup)(?:$|[-_])/i
/** An element that opens a line: `<tag attr="…">`. */
const OPEN_TAG = /^<([A-Za-z][\w-]*)(?:\s[^<>]*)?>/
/** A line that opens or closes a worked example in the style harnesses write (`--- DEMONSTRATION ---`). */
const DEMO_LINE = /^-{2,}\s*(END OF\s+)?DEMONSTRATIONS?\s*-{2,}$/i
const FENCE = /^\s*(```|~~~)/
const CLOSE_TAG = /<\/([A-Za-z][\w-]*)>/g

/** ANSI escape sequences, and the ones whose escape byte a terminal copy lost (`[1m`, `[22m`). */
// eslint-disable-next-line no-control-regex -- the escape and bell characters are what is looked for
const ANSI = /\u001b\[[0-9;?]*[A-Za-z]|\u001b\][^\u0007]*\u0007|\[(?:\d{1,3};)*\d{1,3}m/g

/** A text without ANSI colour and cursor codes. */
export function withoutAnsi(text: string): string {
  return text.includes('[') ? text.replace(ANSI, '') : text
}

/**
 * A text's fingerprint as it is compared, case, blanks and numbers aside ("Found 2 actions" and "found
 * 3  actions" are one), in one pass with no copy of the text: a 53-bit FNV-1a-style hash, as 11 base-36
 * characters (fingerprints, not text, are remembered). `length` is that form's length.
 */
function shapePrint(text: string, from = 0, to = text.length): { fingerprint: string; length: number } {
  let h1 = 0x811c9dc5
  let h2 = 0x01000193
  let length = 0
  let blank = false
  let digits = false
  for (let i = from; i < to; i++) {
    let c = text.charCodeAt(i)
    if (c === 32 || (c >= 9 && c <= 13)) {
      blank = length > 0
      digits = false
      continue
    }
    if (c >= 48 && c <= 57) {
      if (digits) continue
      digits = true
      c = 35 // '#'
    } else {
      digits = false
      if (c >= 65 && c <= 90) c += 32
    }
    if (blank) {
      h1 = Math.imul(h1 ^ 32, 16777619)
      h2 = Math.imul(h2 ^ 32, 2246822519)
      length++
      blank = false
    }
    h1 = Math.imul(h1 ^ c, 16777619)
    h2 = Math.imul(h2 ^ c, 2246822519)
    length++
  }
  return { fingerprint: ((h1 >>> 0) * 2 ** 21 + ((h2 >>> 0) & 0x1fffff)).toString(36).padStart(11, '0'), length }
}

/** A text's fingerprint, as it is compared (case, blanks and numbers aside). */
export function fingerprint(text: string): string {
  return shapePrint(text).fingerprint
}

/** A blank as String.prototype.trim takes it (an ASCII one, or any other `\s`). */
function isTrimmed(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || (c >= 0xa0 && /\s/.test(String.fromCharCode(c)))
}

/** `text.slice(start, end).trim().length`, without the copy. */
function trimmedLength(text: string, start: number, end: number): number {
  while (start < end && isTrimmed(text.charCodeAt(start))) start++
  while (end > start && isTrimmed(text.charCodeAt(end - 1))) end--
  return end - start
}

/** The fingerprints of a text's lines long enough to be told apart, with their lengths (trimmed). */
export function lineFingerprints(text: string): { fingerprint: string; chars: number }[] {
  const out: { fingerprint: string; chars: number }[] = []
  let start = 0
  while (start <= text.length) {
    let end = text.indexOf('\n', start)
    if (end < 0) end = text.length
    if (end - start >= FINGERPRINT_MIN_CHARS) {
      const { fingerprint: fp, length } = shapePrint(text, start, end)
      if (length >= FINGERPRINT_MIN_CHARS) out.push({ fingerprint: fp, chars: trimmedLength(text, start, end) })
    }
    start = end + 1
  }
  return out
}

/**
 * A request cut into pieces: an element that opens a line, to the line that closes it; a worked
 * example, between its marker lines; else a paragraph (lines up to a blank one, a fenced block whole).
 */
export function requestPieces(text: string): string[] {
  const lines = text.split('\n')
  const closing = closingLines(lines)
  // the next line that ends a worked example, from each line (one pass backwards: no scan per opening)
  const demoEnd = /DEMONSTRATION/i.test(text) ? demoEnds(lines) : undefined
  const pieces: string[] = []
  let i = 0
  while (i < lines.length) {
    const t = (lines[i] ?? '').trim()
    if (t === '') {
      i++
      continue
    }
    let end: number
    const open = OPEN_TAG.exec(t)
    if (open) {
      end = nextAtOrAfter(closing.get(open[1] ?? '') ?? [], i)
      if (end < 0) end = paragraphEnd(lines, i)
    } else if (demoEnd !== undefined && DEMO_LINE.test(t) && !/END OF/i.test(t)) {
      end = demoEnd[i + 1] ?? lines.length
      if (end >= lines.length) end = paragraphEnd(lines, i)
    } else end = paragraphEnd(lines, i)
    pieces.push(lines.slice(i, end + 1).join('\n'))
    i = end + 1
  }
  return pieces
}

/** For each line, the next line at or after it that ends a worked example (lines.length where none does). */
function demoEnds(lines: readonly string[]): number[] {
  const out: number[] = new Array<number>(lines.length + 1).fill(lines.length)
  for (let k = lines.length - 1; k >= 0; k--) {
    const l = (lines[k] ?? '').trim()
    out[k] = DEMO_LINE.test(l) && /END OF/i.test(l) ? k : (out[k + 1] ?? lines.length)
  }
  return out
}

/** For each tag name, the lines that hold its closing tag, in order. */
function closingLines(lines: readonly string[]): Map<string, number[]> {
  const out = new Map<string, number[]>()
  lines.forEach((line, k) => {
    if (!line.includes('</')) return
    for (const m of line.matchAll(CLOSE_TAG)) {
      const name = m[1] ?? ''
      const at = out.get(name)
      if (at === undefined) out.set(name, [k])
      else if (at[at.length - 1] !== k) at.push(k)
    }
  })
  return out
}

/** The first of `sorted` at or after `i`, or -1 (a binary search). */
function nextAtOrAfter(sorted: readonly number[], i: number): number {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if ((sorted[mid] ?? 0) < i) lo = mid + 1
    else hi = mid
  }
  return lo < sorted.length ? (sorted[lo] ?? -1) : -1
}

/** The last line of the paragraph that starts at `i`: before a blank line, a fenced block kept whole. */
function paragraphEnd(lines: readonly string[], i: number): number {
  let end = i
  let fenced = false
  for (; end < lines.length; end++) {
    const l = lines[end] ?? ''
    if (FENCE.test(l)) fenced = !fenced
    else if (!fenced && l.trim() === '') return end - 1
    // an element or a worked example that opens the next line starts a piece of its own
    const next = (lines[end + 1] ?? '').trim()
    if (!fenced && (OPEN_TAG.test(next) || DEMO_LINE.test(next))) return end
  }
  return lines.length - 1
}

/** The tag of a piece that is one element whose tag names harness material, or of a worked example. */
function harnessTag(piece: string): string | undefined {
  const t = piece.trim()
  if (DEMO_LINE.test(t.split('\n', 1)[0] ?? '')) return 'demonstration'
  const open = OPEN_TAG.exec(t)
  if (!open || !HARNESS_TAG_WORD.test(open[1] ?? '')) return undefined
  // the element, and any that follow it on its last line (`<x-stdout>…</x-stdout><x-stderr></x-stderr>`)
  return /<\/[\w-]+>$/.test(t) && t.includes(`</${open[1] ?? ''}>`) ? open[1] : undefined
}

/** Of a piece's characters, how many are in lines other conversations sent too. */
function commonShare(piece: string, common: CommonText): number {
  let total = 0
  let shared = 0
  for (const line of piece.split('\n')) total += line.trim().length
  for (const l of lineFingerprints(piece)) if (common(l.fingerprint)) shared += l.chars
  return total === 0 ? 0 : shared / total
}

/** A piece is text other conversations sent when most of it is in lines they sent. */
const COMMON_SHARE = 0.6
/** A piece is repeated harness text when this many requests of the span hold it (a person may send a request twice). */
const REPEATED_IN = 3
/** …and it says at least this much (a short "go on" is chatter, folded elsewhere). */
const REPEATED_MIN_CHARS = 40

/**
 * The span's requests cut into pieces and each piece told: the user's own words, or harness text by
 * markup, by repetition in the span, or as text other conversations sent (`common`).
 */
export function classifyRequests(requests: readonly string[], common?: CommonText): RequestPiece[][] {
  const split = requests.map((r) => requestPieces(withoutAnsi(r)))
  const inRequests = new Map<string, number>()
  const prints = split.map((pieces) => pieces.map((p) => fingerprint(p)))
  for (const fps of prints) for (const fp of new Set(fps)) inRequests.set(fp, (inRequests.get(fp) ?? 0) + 1)
  return split.map((pieces, r) =>
    pieces.map((text, k) => {
      const fp = prints[r]?.[k] ?? ''
      const tag = harnessTag(text)
      if (tag) return { text, harness: 'markup' as const, tag, fingerprint: fp }
      if ((inRequests.get(fp) ?? 0) >= REPEATED_IN && text.trim().length >= REPEATED_MIN_CHARS) return { text, harness: 'repeated' as const, fingerprint: fp }
      if (common && commonShare(text, common) >= COMMON_SHARE) return { text, harness: 'common' as const, fingerprint: fp }
      return { text, fingerprint: fp }
    })
  )
}

function quoteHead(text: string): string {
  const first = (text.split('\n').find((l) => l.trim() !== '' && !/^<\/?[\w-]+[^<>]*>$/.test(l.trim())) ?? '').trim()
  return first.length > 80 ? `${sliceHead(first, 79)}…` : first
}

/** 4679 → "4,679" (toLocaleString asks the locale data every call). */
function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+$)/g, ',')
}

/** The one line that names a piece of harness text left out. */
export function harnessMention(piece: RequestPiece, times: number): string {
  const size = `${thousands(piece.text.length)} characters`
  const head = quoteHead(piece.text)
  const quoted = head ? `, "${head}"` : ''
  if (piece.harness === 'markup') return `[harness text left out: <${piece.tag ?? '?'}>${quoted}, ${size}${times > 1 ? `, sent ${times} times` : ''}]`
  if (piece.harness === 'repeated') return `[harness text left out: sent ${times} times${quoted}]`
  return `[harness text left out (other sessions sent it too)${quoted}, ${size}]`
}

/** A line a client or a transcript writes between turns, in brackets: `[Request interrupted by user]`. */
const MARKER_LINE = /^\s*\[[A-Z][a-z]+(?: [^\]\n]+){2,}\](?!\()/m
const MARKER_AT_START = /^\[[A-Z][a-z]+(?: [^\]\n]+){2,}\](?!\()\s*/

function withoutMarkers(text: string): string {
  return text
    .split('\n')
    .map((l) => (MARKER_AT_START.test(l.trim()) ? l.trim().replace(MARKER_AT_START, '') : l))
    .filter((l, k, all) => l !== '' || (k > 0 && all[k - 1] !== ''))
    .join('\n')
    .trim()
}

export const HARNESS_MENTION = /^\[harness text left out[^\n]*\]$/

/**
 * Each request as the summary keeps it: the user's words verbatim, and in place of the harness text a
 * line that names it, only where it first came; a request that was only harness text after that is ''.
 */
export function usersWords(requests: readonly string[], common?: CommonText): string[] {
  const classified = classifyRequests(requests, common)
  const times = new Map<string, number>()
  for (const pieces of classified) for (const p of pieces) if (p.harness) times.set(p.fingerprint, (times.get(p.fingerprint) ?? 0) + 1)
  const named = new Set<string>()
  return classified.map((pieces) => {
    const out: string[] = []
    for (const p of pieces) {
      if (!p.harness) {
        const own = MARKER_LINE.test(p.text) ? withoutMarkers(p.text) : p.text
        if (own !== '') out.push(own)
      } else if (!named.has(p.fingerprint)) {
        named.add(p.fingerprint)
        out.push(harnessMention(p, times.get(p.fingerprint) ?? 1))
      }
    }
    return out.join('\n\n').trim()
  })
}
