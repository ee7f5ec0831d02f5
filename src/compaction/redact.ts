/**
 * Secrets of the common kinds, replaced by `[REDACTED:kind]` before any text leaves the process.
 * Order matters: whole blocks (private keys) before the token shapes that may sit inside them.
 */
interface SecretPattern {
  kind: string
  pattern: RegExp
  /** Builds the replacement from the match groups; by default the whole match is replaced. */
  replace?: (match: string, ...groups: string[]) => string | undefined
}

const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    kind: 'private_key',
    pattern: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/g
  },
  { kind: 'anthropic_key', pattern: /\bsk-ant-[A-Za-z0-9_-]{16,}/g },
  { kind: 'openai_key', pattern: /\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}/g },
  { kind: 'github_token', pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})/g },
  { kind: 'slack_token', pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g },
  { kind: 'aws_access_key', pattern: /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b/g },
  { kind: 'google_api_key', pattern: /\bAIza[0-9A-Za-z_-]{35}\b/g },
  { kind: 'jwt', pattern: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  {
    kind: 'url_password',
    pattern: /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@'"]+):([^\s@/'"]+)@/gi,
    replace: (_m, userPart) => `${userPart}:[REDACTED:url_password]@`
  },
  {
    kind: 'bearer_token',
    pattern: /\b(Bearer\s+)([A-Za-z0-9._~+/=-]{16,})/g,
    replace: (_m, prefix) => `${prefix}[REDACTED:bearer_token]`
  },
  {
    kind: 'assignment',
    // password=..., secret: ..., AWS_SECRET_ACCESS_KEY="...", api_key => '...'; the name must end in the
    // keyword (so `tokenizer = ...` is code, not a secret) and the value must not be a plain number.
    pattern:
      /\b([A-Za-z0-9_.-]*?(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|credentials?))(?![A-Za-z0-9_])(["']?\s*(?:=|:|=>)\s*)(["']?)([^\s"'`,;)}\]]{6,})\3/gi,
    replace: (match, name, sep, quote, value) =>
      /^[\d.]+$/.test(value ?? '') || /^\[REDACTED/.test(value ?? '') ? undefined : `${name}${sep}${quote}[REDACTED:secret]${quote}`
  }
]

export interface Redaction {
  text: string
  /** How many secrets were replaced, by kind. */
  counts: Record<string, number>
}

export function redactSecrets(text: string): Redaction {
  const counts: Record<string, number> = {}
  let out = text
  for (const { kind, pattern, replace } of SECRET_PATTERNS) {
    out = out.replace(pattern, (match: string, ...groups: unknown[]) => {
      if (match.includes('[REDACTED:')) return match
      const replaced = replace ? replace(match, ...(groups.slice(0, -2) as string[])) : `[REDACTED:${kind}]`
      if (replaced === undefined) return match
      counts[kind] = (counts[kind] ?? 0) + 1
      return replaced
    })
  }
  return { text: out, counts }
}

export function redact(text: string): string {
  return redactSecrets(text).text
}
