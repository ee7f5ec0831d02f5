import { ASSIGNED_VALUE, KEY_BODY_LINE, PASSWORD_NAMES, SECRET_NAMES, SECRET_PATTERNS, type SecretPattern } from './secret-patterns.js'
import { at as elementAt } from './at.js'

/**
 * Secrets replaced by `[REDACTED:kind]` before any text leaves the process. Detection is data
 * (secret-patterns.ts); a caller may add ranges found by other rules (secretlint's preset, in
 * src/secrets/) and apply both at once with `applyRedactions`.
 *
 * One case-insensitive scan finds the places where a secret can start; each place is then checked
 * with the sticky patterns whose prefix is there. Span texts run to megabytes, so one scan instead of
 * one per pattern keeps redaction cheap.
 */

/** A found secret: the characters [start, end) of the text, and what kind it is. */
export interface SecretRange {
  start: number
  end: number
  kind: string
}

/** A function that returns a text with its secrets replaced; the core's own is `redact`. */
export type Redact = (text: string) => string
/** The same for many texts at once (one pass of a slower ruleset over all of them). */
export type RedactMany = (texts: readonly string[]) => string[]

interface Compiled {
  /** Its place in SECRET_PATTERNS. */
  index: number
  kind: string
  prefix: RegExp
  pattern: RegExp
  group: number
  wordStart: boolean
  lineScan: boolean
}

const COMPILED: readonly Compiled[] = SECRET_PATTERNS.map((p, index) => ({
  index,
  kind: p.kind,
  prefix: new RegExp(p.prefix, 'iy'),
  pattern: new RegExp(p.pattern, 'y'),
  group: p.group ?? 0,
  wordStart: p.wordStart ?? false,
  lineScan: p.lineScan ?? false
}))

/**
 * Patterns by the first character of their prefix (lower-cased); prefixes that open with a class or a
 * group are tried at every candidate. Most candidates then try one or two patterns, not all of them.
 */
function byFirstChar(patterns: readonly Compiled[], prefixes: readonly string[]): { [c: string]: Compiled[] } {
  const table: { [c: string]: Compiled[] } = {}
  const anywhere: Compiled[] = []
  patterns.forEach((p, i) => {
    const prefix = elementAt(prefixes, i)
    if (/^[A-Za-z0-9:"-]/.test(prefix) && !prefix.includes('|')) (table[prefix.charAt(0).toLowerCase()] ??= []).push(p)
    else anywhere.push(p)
  })
  for (const c of Object.keys(table)) table[c] = [...(table[c] ?? []), ...anywhere]
  table[''] = anywhere
  return table
}

const BY_FIRST_CHAR = byFirstChar(
  COMPILED,
  SECRET_PATTERNS.map((p) => p.prefix)
)

const NAME = new RegExp(SECRET_NAMES, 'iy')
const ASSIGNED = new RegExp(ASSIGNED_VALUE, 'y')
/** The rest of a name ASSIGNED reads before its separator. */
const NAME_RUN = /[A-Za-z0-9_.-]*/y
/**
 * Where a secret may start: any prefix or name. A pattern that may not continue a word is no candidate
 * inside one (the loop below would skip it anyway): a prefix that opens with a class,
 * `[A-Za-z0-9]{14}\.atlasv1\.` say, was otherwise tried at every letter of every word. Those prefixes
 * share one lookbehind, so that inside a word the scan tests it once and none of them.
 */
function candidates(patterns: readonly SecretPattern[]): RegExp {
  return new RegExp(
    [
      `(?<![A-Za-z0-9_])(?:${patterns
        .filter((p) => p.wordStart)
        .map((p) => p.prefix)
        .join('|')})`,
      ...patterns.filter((p) => !p.wordStart).map((p) => p.prefix),
      SECRET_NAMES
    ].join('|'),
    'gi'
  )
}
/** Patterns whose matches hold a text of their own (`contains`): scanned for only where the text holds it. */
const GATED = SECRET_PATTERNS.filter((p) => p.contains !== undefined)
const CANDIDATE = candidates(SECRET_PATTERNS)
/** The scan of a text that holds no gated pattern's text (most texts): a class-led prefix is tried at every word (docs/performance.md). */
const CANDIDATE_UNGATED = candidates(SECRET_PATTERNS.filter((p) => p.contains === undefined))
const KEY_BODY = new RegExp(KEY_BODY_LINE, 'gm')
const WORD_CHAR = /[A-Za-z0-9_]/

/**
 * The name a placeholder holds: at most 40 characters, or more in capitals (`$AZURE_STORAGE_CONNECTION_STRING_…`).
 * A random value of a name's characters is longer and mixes its cases or is lowercase (a Django key).
 */
const PLACEHOLDER_NAME = '(?:[A-Za-z_][A-Za-z0-9_]{0,39}|[A-Z_][A-Z0-9_]{40,})'
/**
 * A value that is a placeholder or a reference to one, whole (a random value may begin with `$` or `%` too):
 * `${NAME}`, `$NAME`, `<your-key>`, `{{ secret }}`, `{% … %}`, `{token}`, `%(password)s`, `%NAME%`. A command
 * substitution is a command's name (a word of at most 40 characters, or a redirection `<`) and its arguments
 * after a blank. A Django key may be `$(` and 47 more characters of its alphabet up to a `)`, or `%(`, 46 word
 * characters and `)s`: longer than any name.
 */
const PLACEHOLDER = new RegExp(
  `^(?:\\$\\{${PLACEHOLDER_NAME}(?::?[-=?+][^}]*)?\\}|\\$${PLACEHOLDER_NAME}|\\$\\((?:[A-Za-z_./~][\\w./~-]{0,39}|<)(?:\\s.*)?\\)|<[^<>]*>|\\{\\{.*\\}\\}|\\{%.*%\\}|\\{[A-Za-z_][\\w.]*\\}|%\\(?${PLACEHOLDER_NAME}\\)?s?|%${PLACEHOLDER_NAME}%)$`
)

/** A bare value read on past brackets: up to a blank, a quote or a separator. */
const VALUE_REST = /[^\s"'`,;]*/y
/** A value's least length; one read on past a bracket must be longer. */
const MIN_VALUE = 6
const MIN_BRACKETED = 16
/** Code, not a secret: a call or a subscript on a name, its arguments names and literals (`get_token(user)`, `config.get(`). */
const CODE_SHAPE = /^[A-Za-z_][\w.]*(?:\([\w.,:=-]*\)?|\[[\w.,:=-]*\]?)$/

/** A value after a secret's name that is code or a placeholder, not a secret. */
function notASecret(value: string): boolean {
  return (
    /^[\d.]+$/.test(value) ||
    value.startsWith('[REDACTED') ||
    // a placeholder or a reference, whole: ${API_KEY}, $TOKEN, <your-key>, {{ secret }}, %(password)s, {token}
    PLACEHOLDER.test(value) ||
    // an identifier or attribute path without digits: `self.token`, `None`, `os.environ`
    /^[A-Za-z_][A-Za-z_.-]*$/.test(value) ||
    /^(.)\1+$/.test(value)
  )
}

/** What follows a name that is assigned to: its separator. */
const ASSIGNED_NEXT = /^\s*(?::=|=>|=|:)(?![=:])/

/**
 * Whether a value that reads as a word or an identifier (which after `token` or `key` is code: `self.token`)
 * is a password all the same: it is assigned to a password or secret name (PASSWORD_NAMES) either as a quoted
 * literal or to a name in the environment's style (`DB_PASSWORD=correct-horse-battery-staple`).
 */
function passphrase(text: string, at: number, name: string, value: string, quoted: boolean): boolean {
  if (!PASSWORD_NAMES.test(name) || /^(?:None|null|nil|true|false|undefined|True|False)$/.test(value) || value.includes('.')) return false
  if (quoted) return true
  let from = at
  while (from > 0 && /[A-Za-z0-9_]/.test(text.charAt(from - 1))) from--
  let to = at + name.length
  while (to < text.length && /[A-Za-z0-9_]/.test(text.charAt(to))) to++
  return /^[A-Z][A-Z0-9_]*$/.test(text.slice(from, to))
}

/** An assignment whose separator is a call's comma after a quoted name (its quote, group 1). */
const CALL_PAIR = /^[A-Za-z0-9_.-]*(["'])\s*,/

/** Where the run of name characters that holds the name at `at` begins. */
function runStart(text: string, at: number): number {
  let from = at
  while (from > 0 && /[A-Za-z0-9_]/.test(text.charAt(from - 1))) from--
  return from
}

/**
 * The value of an environment line (`NAME=value` at a line's start, `export` allowed, the name in capitals),
 * read to its first blank: what follows `=` is the value whatever it begins with. Undefined where the name is
 * not such a line's, or the value is a placeholder or too short.
 */
function envValue(text: string, at: number, end: number): { start: number; end: number } | undefined {
  const from = runStart(text, at)
  let to = end
  while (to < text.length && /[A-Za-z0-9_]/.test(text.charAt(to))) to++
  if (text.charAt(to) !== '=' || !/^[A-Z][A-Z0-9_]*$/.test(text.slice(from, to))) return undefined
  const lineStart = text.lastIndexOf('\n', from - 1) + 1
  if (!/^[ \t]*(?:export[ \t]+)?$/.test(text.slice(lineStart, from))) return undefined
  VALUE_REST.lastIndex = to + 1
  const value = VALUE_REST.exec(text)?.[0] ?? ''
  if (value.length < MIN_VALUE || PLACEHOLDER.test(value) || /^(.)\1+$/.test(value)) return undefined
  return { start: to + 1, end: to + 1 + value.length }
}

/** Basic credentials are base64 of `user:password`; anything else after the word "basic" is prose. */
function isBasicCredential(value: string): boolean {
  try {
    const decoded = atob(value)
    return decoded.includes(':') && /^[\x20-\x7e]+$/.test(decoded)
  } catch {
    return false
  }
}

function isKeyBodyLine(line: string): boolean {
  return /[A-Z]/.test(line) && /[a-z]/.test(line) && /\d/.test(line) && !/^[0-9a-fA-F]+$/.test(line)
}

/** An armored block (RFC 7468, OpenPGP) whose label names no private key: its body is public material. */
const ARMOR = /-----BEGIN ([A-Z0-9 ]{1,60})-----/g

/** Where the public armored blocks of a text lie: from their BEGIN line to their END line (or the text's end). */
function publicBlocks(text: string): [number, number][] {
  if (!text.includes('-----BEGIN ')) return []
  const out: [number, number][] = []
  ARMOR.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = ARMOR.exec(text)) !== null) {
    const label = elementAt(m, 1)
    if (/PRIVATE|SECRET/.test(label)) continue
    const close = text.indexOf(`-----END ${label}-----`, m.index)
    out.push([m.index, close < 0 ? text.length : close])
  }
  return out
}

/** Every secret the service's own patterns find in a text, in order, not overlapping. */
export function findSecrets(text: string): SecretRange[] {
  const found: SecretRange[] = []
  let covered = 0
  const candidate = GATED.some((p) => text.includes(p.contains ?? '')) ? CANDIDATE : CANDIDATE_UNGATED
  candidate.lastIndex = 0
  // Linear in the text: a line-scanning pattern that failed is not tried again on its line (failedTo: where
  // that line ends), nor a name's assignment inside the run of name characters it already read (assignFailTo).
  const failedTo: number[] = []
  let assignFailTo = -1
  let c: RegExpExecArray | null
  while ((c = candidate.exec(text)) !== null) {
    const at = c.index
    if (at < covered) continue
    let matched = false
    for (const p of BY_FIRST_CHAR[text.charAt(at).toLowerCase()] ?? BY_FIRST_CHAR[''] ?? []) {
      if (p.lineScan && at < (failedTo[p.index] ?? -1)) continue
      p.prefix.lastIndex = at
      if (!p.prefix.test(text)) continue
      if (p.wordStart && at > 0 && WORD_CHAR.test(text.charAt(at - 1))) continue
      p.pattern.lastIndex = at
      const m = p.pattern.exec(text)
      if (!m) {
        if (p.lineScan) {
          const eol = text.indexOf('\n', at)
          failedTo[p.index] = eol < 0 ? text.length : eol
        }
        continue
      }
      const part = elementAt(m, p.group)
      if (p.kind === 'basic_auth' && !isBasicCredential(part)) continue
      const start = at + (p.group === 0 ? 0 : m[0].lastIndexOf(part))
      found.push({ start, end: start + part.length, kind: p.kind })
      covered = at + m[0].length
      candidate.lastIndex = Math.max(candidate.lastIndex, covered)
      matched = true
      break
    }
    if (matched) continue
    // A secret's name (`password`, `DB_PASSWORD`, `apiKey`): the value assigned to it goes.
    NAME.lastIndex = at
    const name = NAME.exec(text)
    if (!name) continue
    const end = at + name[0].length
    if (end <= assignFailTo) continue
    ASSIGNED.lastIndex = end
    const v = ASSIGNED.exec(text)
    if (!v) {
      // an environment line's value may begin with what reads as a comparison (`SECRET_KEY==x…`: the value is `=x…`)
      const env = envValue(text, at, end)
      if (env) {
        found.push({ ...env, kind: 'secret' })
        covered = env.end
        candidate.lastIndex = covered
        continue
      }
      // every name that ends inside the same run of name characters reads the same rest, and fails the same way
      NAME_RUN.lastIndex = end
      NAME_RUN.exec(text)
      assignFailTo = NAME_RUN.lastIndex
      continue
    }
    // a call's pair (`setdefault("SECRET_KEY", "…")`) is a name that is a whole quoted string, then its value
    const pair = CALL_PAIR.exec(v[0])
    if (pair && text.charAt(runStart(text, at) - 1) !== pair[1]) continue
    const value = v[2] ?? elementAt(v, 3)
    const valueEnd = end + v[0].length - (v[1] ?? '').length
    const start = valueEnd - value.length
    // a bare "value" that is itself assigned to (`secret:\nSECRET_KEY = '…'`, a line flattened into the one
    // before) is the next name, not a value: the scan goes on to it
    if (v[2] === undefined && ASSIGNED_NEXT.test(text.slice(valueEnd, valueEnd + 8))) continue
    // a bare value that goes on past a bracket: a random secret holds brackets too (Django's `(`, `)`), a call does not read as one
    VALUE_REST.lastIndex = start
    const whole = v[2] === undefined ? (VALUE_REST.exec(text)?.[0] ?? value) : value
    if (whole.length > value.length && whole.length >= MIN_BRACKETED && !CODE_SHAPE.test(whole) && !PLACEHOLDER.test(whole)) {
      found.push({ start, end: start + whole.length, kind: 'secret' })
      covered = start + whole.length
    } else {
      if (value.length < MIN_VALUE || (notASecret(value) && !passphrase(text, at, name[0], value, v[2] !== undefined))) continue
      found.push({ start, end: valueEnd, kind: 'secret' })
      covered = valueEnd
    }
    candidate.lastIndex = covered
  }
  // Bare key bodies (a PEM or OpenSSH key whose BEGIN line is elsewhere): runs of two or more base64-only
  // lines, but for those inside a block that says it is public (a certificate, a public key, a signature).
  // A line alone is base64 test data, an integrity hash or a fixture far more often than a key's remnant.
  if (text.length >= 120) {
    const open = publicBlocks(text)
    const lines: SecretRange[] = []
    KEY_BODY.lastIndex = 0
    let line: RegExpExecArray | null
    while ((line = KEY_BODY.exec(text)) !== null) {
      const body = elementAt(line, 1)
      if (!isKeyBodyLine(body)) continue
      const start = line.index + line[0].indexOf(body)
      if (open.some(([from, to]) => start >= from && start < to)) continue
      lines.push({ start, end: start + body.length, kind: 'private_key' })
    }
    // a line counts when the line before or after it is one too (only blanks and one line break between)
    const adjacent = (a: SecretRange | undefined, b: SecretRange | undefined): boolean =>
      a !== undefined && b !== undefined && /^[ \t]*\r?\n[ \t]*$/.test(text.slice(a.end, b.start))
    lines.forEach((l, i) => {
      if (adjacent(lines[i - 1], l) || adjacent(l, lines[i + 1])) found.push(l)
    })
  }
  return found
}

const SECRET_KEY = new RegExp(SECRET_NAMES, 'i')

/**
 * A structured value (a tool's input) with each of its strings redacted where it stands, before it is
 * serialized: in JSON text a file's content is one escaped line, so rules that read line starts, quotes
 * or a value's end see `\\n` and `\\"` instead. A string whose key names a secret (`password`,
 * `SecretAccessKey`, `private_key_id`) goes whole. Objects and arrays are copied only where something changed.
 */
export function redactValues(value: unknown, redact: Redact, key = ''): unknown {
  if (typeof value === 'string') {
    if (key !== '' && value.length >= 6 && SECRET_KEY.test(key) && !notASecret(value)) return '[REDACTED:secret]'
    return redact(value)
  }
  if (Array.isArray(value)) {
    let out: unknown[] | undefined
    for (let i = 0; i < value.length; i++) {
      const next = redactValues(value[i], redact, key)
      if (next !== value[i]) (out ??= value.slice())[i] = next
    }
    return out ?? value
  }
  if (typeof value === 'object' && value !== null) {
    let out: Record<string, unknown> | undefined
    for (const [k, v] of Object.entries(value)) {
      const next = redactValues(v, redact, k)
      if (next !== v) (out ??= { ...(value as Record<string, unknown>) })[k] = next
    }
    return out ?? value
  }
  return value
}

/** The text with the given ranges (from any detector, overlapping or not) replaced by their markers. */
export function applyRedactions(text: string, ranges: readonly SecretRange[]): string {
  if (ranges.length === 0) return text
  const sorted = [...ranges].sort((a, b) => a.start - b.start || b.end - a.end)
  let out = ''
  let last = 0
  for (const r of sorted) {
    if (r.end <= last) continue
    if (r.start < last) {
      // a range that began inside one already replaced extends it rather than leaving its tail
      last = r.end
      continue
    }
    out += `${text.slice(last, r.start)}[REDACTED:${r.kind}]`
    last = r.end
  }
  return out + text.slice(last)
}

export interface Redaction {
  text: string
  /** How many secrets were replaced, by kind. */
  counts: Record<string, number>
}

export function redactSecrets(text: string): Redaction {
  const ranges = findSecrets(text)
  const counts: Record<string, number> = {}
  for (const r of ranges) counts[r.kind] = (counts[r.kind] ?? 0) + 1
  return { text: applyRedactions(text, ranges), counts }
}

/** The core's redaction: the service's own patterns. */
export const redact: Redact = (text) => applyRedactions(text, findSecrets(text))

/**
 * The redactions one compaction's texts go through. They remember the secrets they have found (the
 * service's do), so they are passed beside the compaction's plan, which is data only, and never kept on it.
 */
export interface Redactors {
  /** The full ruleset, for single texts. */
  redact: Redact
  /** A quicker one for whole texts before they are clipped (the full one then runs on what is kept). */
  redactBeforeClip: Redact
  /** The full ruleset over many texts at once. */
  redactParts: RedactMany
  /** The secrets found so far, value and kind (replaced wherever they show up again): given to redactors on another thread. */
  known?: () => [string, string][]
}

/** The core's own patterns, for callers without the service's fuller ruleset. */
export const CORE_REDACTORS: Redactors = { redact, redactBeforeClip: redact, redactParts: (texts) => texts.map(redact) }
