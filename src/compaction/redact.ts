/**
 * Secrets of the common kinds, replaced by `[REDACTED:kind]` before any text leaves the process.
 *
 * One case-insensitive scan finds the places where a secret can start (a key prefix, `://`, `Bearer`,
 * or a name like `password` or `api_key`); each place is then checked with a sticky pattern of its own
 * kind. Span texts run to megabytes, so one scan instead of a dozen keeps redaction cheap.
 */

interface SecretShape {
  kind: string
  /** Matched at the candidate's position (sticky), case-sensitive. */
  pattern: RegExp
  /** The part of the match to replace: group index, 0 for the whole match. */
  group: number
  /** A secret must not continue a word (`\b` before it). */
  wordStart: boolean
}

const shape = (kind: string, source: string, group = 0, wordStart = true): SecretShape => ({ kind, pattern: new RegExp(source, 'y'), group, wordStart })

const PRIVATE_KEY = shape('private_key', '-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\\s\\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)', 0, false)
const ANTHROPIC = shape('anthropic_key', 'sk-ant-[A-Za-z0-9_-]{16,}')
const OPENAI = shape('openai_key', 'sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}')
const GITHUB = shape('github_token', '(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})')
const SLACK = shape('slack_token', 'xox[abposr]-[A-Za-z0-9-]{10,}')
const AWS = shape('aws_access_key', '(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9_])')
const GOOGLE = shape('google_api_key', 'AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])')
const JWT = shape('jwt', 'eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}')
/** `scheme://user:password@host`: only the password goes. Checked from the `://`. */
const URL_PASSWORD = shape('url_password', ':\\/\\/[^\\s:/@\'"]+:([^\\s@/\'"]+)@', 1, false)
const BEARER = shape('bearer_token', '[Bb]earer\\s+([A-Za-z0-9._~+/=-]{16,})', 1)
/** What follows a secret's name: a separator, an optional quote, a value of six characters or more. */
const ASSIGNED = shape('secret', '(?![A-Za-z0-9_])["\']?\\s*(?:=|:|=>)\\s*(["\']?)([^\\s"\'`,;)}\\]]{6,})\\1', 2, false)

/** Where a secret can start; the match says which shapes to try there. */
const CANDIDATE =
  /-----BEGIN|sk-|gh[pousr]_|github_pat_|xox[abposr]-|A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)|AIza|eyJ|:\/\/|bearer|password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?/gi

function shapesFor(found: string): readonly SecretShape[] {
  switch (found) {
    case '-----BEGIN':
      return [PRIVATE_KEY]
    case 'sk-':
      return [ANTHROPIC, OPENAI]
    case '://':
      return [URL_PASSWORD]
    case 'AIza':
      return [GOOGLE]
    case 'eyJ':
      return [JWT]
  }
  if (/^gh[pousr]_|^github_pat_/.test(found)) return [GITHUB]
  if (found.startsWith('xox')) return [SLACK]
  if (/^A[A-Z]{3}$/.test(found)) return [AWS]
  if (/^bearer$/i.test(found)) return [BEARER]
  return []
}

const WORD_CHAR = /[A-Za-z0-9_]/

export interface Redaction {
  text: string
  /** How many secrets were replaced, by kind. */
  counts: Record<string, number>
}

export function redactSecrets(text: string): Redaction {
  const counts: Record<string, number> = {}
  let out = ''
  let last = 0
  CANDIDATE.lastIndex = 0
  let c: RegExpExecArray | null
  while ((c = CANDIDATE.exec(text)) !== null) {
    const at = c.index
    const found = c[0]
    const shapes = shapesFor(found)
    let replaced = false
    for (const s of shapes) {
      if (s.wordStart && at > 0 && WORD_CHAR.test(text[at - 1]!)) continue
      s.pattern.lastIndex = at
      const m = s.pattern.exec(text)
      if (!m) continue
      const whole = m[0]
      const part = m[s.group]!
      const partStart = at + (s.group === 0 ? 0 : whole.lastIndexOf(part))
      out += `${text.slice(last, partStart)}[REDACTED:${s.kind}]`
      last = partStart + part.length
      counts[s.kind] = (counts[s.kind] ?? 0) + 1
      CANDIDATE.lastIndex = at + whole.length
      replaced = true
      break
    }
    if (replaced || shapes.length > 0) continue
    // A secret's name (`password`, `API_KEY`, ...): the value assigned to it goes.
    const end = at + found.length
    ASSIGNED.pattern.lastIndex = end
    const v = ASSIGNED.pattern.exec(text)
    if (!v) continue
    const value = v[2]!
    if (/^[\d.]+$/.test(value) || value.startsWith('[REDACTED')) continue
    const valueStart = end + v[0].length - value.length - v[1]!.length
    if (valueStart < last) continue
    out += `${text.slice(last, valueStart)}[REDACTED:secret]`
    last = valueStart + value.length
    counts.secret = (counts.secret ?? 0) + 1
    CANDIDATE.lastIndex = last
  }
  return { text: last === 0 ? text : out + text.slice(last), counts }
}

export function redact(text: string): string {
  return redactSecrets(text).text
}
