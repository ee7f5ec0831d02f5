import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { redact, redactSecrets } from '../../src/compaction/index.js'
import { ADVERSARIAL_LINES } from '../helpers/adversarial.js'
import { serviceRedact } from '../../src/secrets/index.js'
import { PLANTED_SECRETS, plantedText } from '../helpers/planted.js'

describe('redactSecrets', () => {
  it('removes every planted secret', () => {
    const { text, counts } = redactSecrets(plantedText())
    for (const [kind, secret] of Object.entries(PLANTED_SECRETS)) {
      for (const piece of secret.split('\n')) if (piece.length > 12) expect(text, kind).not.toContain(piece)
      expect(text, kind).not.toContain(secret)
    }
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(10)
    expect(text).toContain('https://deploy:[REDACTED:url_password]@example.com/repo.git')
  })

  it('finds the name of a secret inside a longer name, even where the letters before it read as another prefix', () => {
    // "rapiDAPI_KEY": `dapi` opens a Databricks token, which may not continue a word; it once took the
    // letters of `api_key` with it, and the value went through
    for (const line of ['RAPIDAPI_KEY=f00b4rb4zqux1234567', 'export RAPIDAPI_KEY="9f8e7d6c5b4a39281706"', 'rapidapi_key: Zk3mP9qLx2Vn8Rt4']) {
      const { text } = redactSecrets(line)
      expect(text, line).toContain('[REDACTED:')
      expect(text, line).not.toMatch(/f00b4rb4zqux1234567|9f8e7d6c5b4a39281706|Zk3mP9qLx2Vn8Rt4/)
    }
  })

  it('leaves code that merely mentions tokens alone', () => {
    const code = 'tokenizer = AutoTokenizer.from_pretrained(name)\nmax_tokens = 4096\ninput_tokens: 123456'
    expect(redactSecrets(code).text).toBe(code)
  })
})

describe('what redaction leaves alone', () => {
  it('keeps git SHAs, UUIDs, lockfile hashes, test ids, checksums and prose', () => {
    const text = [
      'commit 3f2c9a1b8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b',
      'Merge: 3f2c9a1 8e7d6c5',
      'request_id: 123e4567-e89b-12d3-a456-426614174000',
      '"integrity": "sha512-Kq5sNclPz7QV2+lfQIuiHkiGCAjV8Vo3uOcSwYyK1aEXTg9gUwo1L6bo9zwEJbn5Zxk7tCSRNEyRxs3kKNUyDw=="',
      'resolved "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz#5b8a3a7765dfe001261dde915589e782f8c94d1e"',
      'sha256sum: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'FAILED tests/test_auth.py::test_token_refresh_expired - AssertionError: token mismatch',
      'tests/test_secrets.py::TestPassword::test_password_reset PASSED',
      'def get_token(self): return self._token',
      'password = getpass.getpass()',
      'api_key = os.environ["API_KEY"]',
      'The basic functionality works; see the secret sauce section.',
      'Bearer tokens are described in RFC 6750.'
    ].join('\n')
    expect(serviceRedact(text)).toBe(text)
  })

  it('catches a key body whose BEGIN line is gone, but not a line of hex', () => {
    const body = ['MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMtBXzF1bZKq9', 'Rf7hGX0w3D0cX2q1W8wH9n7dJv9QX1Zk2b5ZcVQ5T8nR3mP6yL4kJ2hG1fD0sA9z'].join(
      '\n'
    )
    const out = redactSecrets(`...tail of a log\n${body}\n-----END RSA PRIVATE KEY-----`).text
    expect(out).not.toContain('MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn')
    expect(out).toContain('[REDACTED:private_key]')
  })
})

describe('keys by shape', () => {
  it('redacts a Google API key and a JWT wherever they stand', () => {
    const google = `AIza${'Sy3kX9'.repeat(5)}abcde`
    const jwt = 'eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTQyIiwiZXhwIjoxOTk5OTk5OTk5fQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmU'
    const text = `maps key=${google}; the cookie held ${jwt} until it expired`
    const { text: out, counts } = redactSecrets(text)
    expect(out).not.toContain(google)
    expect(out).not.toContain(jwt)
    expect(counts.google_api_key).toBe(1)
    expect(counts.jwt).toBe(1)
  })
})

describe('public material', () => {
  // made at test time: base64 lines as a certificate's body has them (64 characters, mixed case and digits)
  const line = (seed: number): string => Buffer.from(Array.from({ length: 48 }, (_, i) => (seed * 31 + i * 7) % 256)).toString('base64')
  const body = (n: number, seed: number): string => Array.from({ length: n }, (_, i) => line(seed + i)).join('\n')
  it('passes untouched inside a block that says it is public: a certificate, a public key, a PGP public key or signature', () => {
    for (const label of ['CERTIFICATE', 'PUBLIC KEY', 'PGP PUBLIC KEY BLOCK', 'PGP SIGNATURE', 'CERTIFICATE REQUEST']) {
      const text = `here it is:\n-----BEGIN ${label}-----\n${body(6, label.length)}\n-----END ${label}-----\n`
      expect(serviceRedact(text), label).toBe(text)
    }
  })
  it('passes untouched outside any block: a lone base64 line of test data, hashes, an SSH public key, integrity strings, ids', () => {
    const hex = (n: number, seed: number): string => Array.from({ length: n }, (_, i) => ((seed * 7 + i * 13) % 16).toString(16)).join('')
    const samples = [
      `expected = "${line(5)}"`, // a fixture's base64 line, 64 characters
      `  ${line(6)}\n\nthat was the encoded payload`,
      `sha256: ${hex(64, 1)}`,
      `commit ${hex(40, 2)}`,
      `ssh-ed25519 ${Buffer.from(`ssh-ed25519-public-${line(7)}`)
        .toString('base64')
        .slice(0, 68)} ci@example`,
      `"integrity": "sha512-${line(8)}${line(9).slice(0, 22)}=="`,
      `request id 6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f finished`
    ]
    for (const text of samples) expect(serviceRedact(text), text).toBe(text)
  })
  it('while a private key, and a bare key body after a public block, are still redacted', () => {
    const privateKey = `-----BEGIN PRIVATE KEY-----\n${body(6, 3)}\n-----END PRIVATE KEY-----`
    expect(serviceRedact(privateKey)).not.toContain(line(3))
    const after = `-----BEGIN CERTIFICATE-----\n${body(3, 9)}\n-----END CERTIFICATE-----\n${body(4, 40)}`
    const out = serviceRedact(after)
    expect(out).toContain(line(9))
    expect(out).not.toContain(line(41))
  })
})

describe('credentials by their kind, wherever text goes', () => {
  // values made for each run, so that the tests are of the kind, not of a string
  const pick = (alphabet: string, n: number, seed: number): string =>
    Array.from({ length: n }, (_, i) => alphabet[(seed * 7 + i * 13 + i * i) % alphabet.length]).join('')
  const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
  const WORDS = ['correct', 'horse', 'battery', 'staple', 'violet', 'meadow', 'quantum', 'harbor', 'lantern', 'pepper']

  it('a bot token inside its URL (a Telegram bot token follows "bot" in api.telegram.org/bot<id>:<token>/…)', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const token = `${String(100_000_000 + seed * 12_345_67).slice(0, 9)}:AA${pick(B64URL, 33, seed)}`
      for (const text of [
        `curl https://api.telegram.org/bot${token}/sendMessage -d chat_id=1`,
        `BOT_URL = "https://api.telegram.org/bot${token}/getMe"`,
        `token ${token}`
      ]) {
        const out = redactSecrets(text).text
        expect(out, text).not.toContain(token.split(':')[1])
      }
    }
    // a number before a colon is no token
    expect(redactSecrets('12345678901234:AAbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb at 1234567890123').text).toContain('12345678901234')
  })

  it('a passphrase without digits assigned to a password or secret name, in the environment or quoted in code', () => {
    for (let seed = 0; seed < 5; seed++) {
      const phrase = [0, 1, 2, 3].map((i) => WORDS[(seed + i * 3) % WORDS.length]).join(['-', '_', '', '.'][seed % 3] ?? '-')
      for (const text of [`DB_PASSWORD=${phrase}`, `export SMTP_SECRET=${phrase}`, `password = "${phrase}"`, `config.db_passwd: '${phrase}'`]) {
        expect(redactSecrets(text).text, text).not.toContain(phrase)
      }
    }
    // code that assigns a name, not a passphrase, is left as it is
    for (const code of ['password = self.password', 'secret = get_secret()', 'passwd = None', 'token = request.token'])
      expect(redactSecrets(code).text).toBe(code)
  })

  it('a bare bot token passed to a call (three base64url parts: the id, a timestamp, an HMAC)', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const token = `M${pick(B64URL.slice(0, 62), 25 + (seed % 4), seed)}.${pick(B64URL, 6, seed + 1)}.${pick(B64URL, 38, seed + 2)}`
      for (const text of [`client.run("${token}")`, `bot.login('${token}')`, `run(${token})`])
        expect(redactSecrets(text).text, text).not.toContain(token.split('.')[2])
    }
  })

  it('a value that starts with punctuation, after a name whose line was flattened into the one before', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const value = `${'=@#!%^&*'[seed % 8]}${pick('abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)', 48, seed)}`.replace(/['"\\]/g, 'x')
      for (const text of [`SECRET_KEY = '${value}'`, `Set the secret: SECRET_KEY = '${value}'`, `the secret:\nSECRET_KEY = '${value}'`]) {
        const out = redactSecrets(text).text
        expect(out, text).not.toContain(value.slice(1, 20))
        expect(out, text).toContain('SECRET_KEY')
      }
    }
  })
})

describe('redaction in time linear in its input', () => {
  /** What completes each kind of line into a secret the redaction must find after all the work before it. */
  const tails: [RegExp, string][] = [
    [/^curl/, ' -u admin:Sup3rSecretPassw0rd'],
    [/^mysql/, ' -pSup3rSecretPassw0rd'],
    [/^redis-cli/, ' -a Sup3rSecretPassw0rd'],
    [/^az login/, ' -p Sup3rSecretPassw0rd'],
    [/^a name run/, '=Sup3rSecretPassw0rd']
  ]

  it("finds the secret at the end of a line that repeats a pattern's start many times (property)", () => {
    fc.assert(
      fc.property(fc.constantFrom(...tails), fc.integer({ min: 1, max: 400 }), ([kind, tail], repeats) => {
        const name = Object.keys(ADVERSARIAL_LINES).find((k) => kind.test(k)) as string
        const line = ADVERSARIAL_LINES[name]!(repeats * 12)
        const out = redact(`${line}${tail}`)
        expect(out).not.toContain('Sup3rSecretPassw0rd')
        // everything before the secret is as it was
        expect(out.startsWith(line.slice(0, Math.max(0, line.length - 40)))).toBe(true)
      })
    )
  })

  it('redacts 1 MiB of each adversarial line (npm run bench times them against JSON.parse of the same bytes)', () => {
    for (const [name, make] of Object.entries(ADVERSARIAL_LINES)) {
      const line = make(1_048_576)
      const out = redact(line)
      // a key's lines (a key body, a key never ended) are one; and what was redacted holds nothing more to redact
      if (/key body|PRIVATE KEY/.test(name)) expect(out, name).toContain('[REDACTED:private_key]')
      expect(redact(out) === out, name).toBe(true)
    }
  }, 60_000)
})
