import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { redact } from '../../src/compaction/index.js'
import { serviceRedact } from '../../src/secrets/index.js'

/**
 * Credential kinds by their documented shapes, generated rather than sampled: each value drawn from its
 * kind's alphabet and length range, placed where code and logs put it. The value must be gone from what both
 * the core's patterns and the service's ruleset leave; ordinary code of like shapes must stay.
 */
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
const chars = (alphabet: string, min: number, max: number): fc.Arbitrary<string> =>
  fc.array(fc.constantFrom(...alphabet.split('')), { minLength: min, maxLength: max }).map((a) => a.join(''))

/** Django's get_random_secret_key(): 50 characters of this alphabet (and `django-insecure-` before it in new projects). */
const DJANGO_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)'
const djangoKey = fc.tuple(fc.boolean(), chars(DJANGO_ALPHABET, 50, 50)).map(([insecure, k]) => `${insecure ? 'django-insecure-' : ''}${k}`)

/** A Discord bot token: the bot's id (a snowflake of 17 to 20 digits) in base64, a timestamp of 6 characters, an HMAC of 27 or 38. */
const discordToken = fc
  .tuple(fc.integer({ min: 1, max: 9 }), chars('0123456789', 16, 19), chars(BASE64URL, 6, 6), fc.constantFrom(27, 38), fc.nat())
  .map(([first, rest, stamp, len, seed]) => {
    const hmac = Array.from({ length: len }, (_, i) => BASE64URL[(seed * 31 + i * 17 + i * i) % 64]).join('')
    return `${Buffer.from(`${first}${rest}`).toString('base64url')}.${stamp}.${hmac}`
  })

/** Where a value stands: alone on a line, quoted or not, in a call, flattened into the line before, in a JSON string. */
const placements: ((name: string, value: string) => string)[] = [
  (n, v) => `${n} = '${v}'`,
  (n, v) => `${n}="${v}"`,
  (n, v) => `${n}=${v}`,
  (n, v) => `export ${n}=${v}`,
  (n, v) => `DEBUG = True${n} = '${v}'`,
  (n, v) => `settings:\n  ${n.toLowerCase()}: "${v}"`,
  (n, v) => JSON.stringify({ env: { [n]: v } }),
  (n, v) => `os.environ.setdefault("${n}", "${v}")`
]
const calls: ((value: string) => string)[] = [
  (v) => `client.run("${v}")`,
  (v) => `client.run('${v}')`,
  (v) => `bot.run(token="${v}")`,
  (v) => `await client.login(\`${v}\`)`,
  (v) => `if __name__ == "__main__":client.run("${v}")`,
  (v) => JSON.stringify({ command: `python -c 'import bot; bot.client.run("${v}")'` })
]

function gone(text: string, value: string): void {
  for (const out of [redact(text), serviceRedact(text)]) {
    // no run of 12 characters of the value is left
    for (let i = 0; i + 12 <= value.length; i += 6) expect(out, `${text}\n→ ${out}`).not.toContain(value.slice(i, i + 12))
  }
}

describe('credential kinds by their shapes', () => {
  it('a Django SECRET_KEY, wherever it is assigned (property)', () => {
    fc.assert(
      fc.property(djangoKey, fc.constantFrom('SECRET_KEY', 'DJANGO_SECRET_KEY'), fc.nat(placements.length - 1), (key, name, k) =>
        gone((placements[k] as (n: string, v: string) => string)(name, key), key.replace(/^django-insecure-/, ''))
      ),
      { numRuns: 400 }
    )
  })

  it('a Discord bot token, passed bare to a call or assigned (property)', () => {
    fc.assert(
      fc.property(discordToken, fc.nat(calls.length + placements.length - 1), (token, k) => {
        const text =
          k < calls.length
            ? (calls[k] as (v: string) => string)(token)
            : (placements[k - calls.length] as (n: string, v: string) => string)('DISCORD_TOKEN', token)
        gone(text, token)
      }),
      { numRuns: 400 }
    )
  })

  it('leaves ordinary code of like shapes alone: hashes, ids, base64 data, dotted names', () => {
    const ordinary = [
      'const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
      'commit 3b18e512dba79e4c8300dd08aeb37f8e728b8dad',
      'import { MessagesBody } from "./contract/proxy-bodies.js"',
      'logger.info(event.request.headers.authorization_scheme)',
      'id: 1234567890123456789',
      'config.settings.DATABASES.default.NAME = "app"',
      'uuid = "123e4567-e89b-12d3-a456-426614174000"',
      'token = get_token(user)',
      'API_KEY=os.environ.get(NAME)',
      'secret = config.secrets[name]',
      'password = make_password(raw, salt=salt)',
      'DATABASE_PASSWORD=${DB_PASSWORD}',
      'SECRET_KEY=$(cat /run/secrets/django_key)',
      'export SECRET_KEY=$(openssl rand -base64 48)',
      'SECRET_KEY=$(pwgen)',
      'DJANGO_SECRET_KEY=$(< /run/secrets/key)',
      'API_KEY=$AZURE_STORAGE_CONNECTION_STRING_FOR_PRODUCTION_EU',
      'SECRET_KEY=%(secret_key)s'
    ]
    for (const line of ordinary) for (const out of [redact(line), serviceRedact(line)]) expect(out, line).toBe(line)
  })

  it('a Django key shaped like a reference ($(…), $…, %(…)s, %…%) is a key: longer than any name (property)', () => {
    const WORD = 'abcdefghijklmnopqrstuvwxyz0123456789_'
    const referenceLike = fc.oneof(
      chars(DJANGO_ALPHABET, 47, 47).map((k) => `$(${k})`),
      chars(WORD, 48, 48).map((k) => `$k${k}`),
      chars(WORD, 45, 45).map((k) => `%(k${k})s`),
      chars(WORD, 47, 47).map((k) => `%k${k}%`)
    )
    fc.assert(
      fc.property(referenceLike, fc.nat(placements.length - 1), (key, k) => gone((placements[k] as (n: string, v: string) => string)('SECRET_KEY', key), key)),
      { numRuns: 400 }
    )
    // the shrunk counterexample that a run of the first property found
    gone(`SECRET_KEY=$(${'a'.repeat(47)})`, `$(${'a'.repeat(47)})`)
  })
})
