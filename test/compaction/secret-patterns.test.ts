import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { plantSecrets } from '../helpers/secrets.js'
import { ASSIGNED_VALUE, KEY_BODY_LINE, SECRET_NAMES, SECRET_PATTERNS } from '../../src/compaction/secret-patterns.js'
import { redact } from '../../src/compaction/redact.js'

describe('SECRET_PATTERNS', () => {
  it('are valid expressions, each with a documented source, and a group only where the pattern has one', () => {
    for (const p of SECRET_PATTERNS) {
      const re = new RegExp(p.pattern, 'y')
      expect(() => new RegExp(p.prefix, 'i'), p.kind).not.toThrow()
      expect(p.source.length, p.kind).toBeGreaterThan(5)
      if (p.group !== undefined) expect(new RegExp(`${re.source}|`).exec('')!.length - 1, p.kind).toBeGreaterThanOrEqual(p.group)
    }
  })

  it('each start where its prefix says: a match of the pattern begins with a match of the prefix', () => {
    // made at test time, so that the repository holds nothing a scanner would flag
    const planted = new Map(plantSecrets().map((p) => [p.kind, p.secret]))
    const samples: Record<string, string | undefined> = {
      anthropic_key: planted.get('anthropic'),
      google_api_key: planted.get('gcp api key'),
      jwt: planted.get('jwt'),
      aws_access_key: planted.get('aws key id'),
      url_password: `://admin:${'pw'.repeat(3)}${Date.now()}@db.internal`,
      docker_auth: `"auth": "${Buffer.from(`u:${Date.now()}`).toString('base64')}"`
    }
    for (const [kind, sample] of Object.entries(samples)) {
      const p = SECRET_PATTERNS.find((x) => x.kind === kind)
      if (p === undefined || sample === undefined) throw new Error(`no pattern or no sample for ${kind}`)
      expect(new RegExp(p.pattern, 'y').test(sample), kind).toBe(true)
      expect(new RegExp(`^(?:${p.prefix})`, 'i').test(sample), kind).toBe(true)
    }
  })
})

describe('assigned values and key bodies', () => {
  const assigned = new RegExp(`(?:${SECRET_NAMES})${ASSIGNED_VALUE}`, 'i')

  it.each([
    ['DB_PASSWORD=s3cr3t-value', 's3cr3t-value'],
    ['"apiKey": "abcdef123456"', 'abcdef123456'],
    ["client_secret => 'zyxwvu98'", 'zyxwvu98'],
    ['token: ghx_0123456789', 'ghx_0123456789'],
    ['password = "two words and more"', 'two words and more'],
    ['apiToken := "go-value-123"', 'go-value-123'],
    ['DB_PASS=plain-value-9', 'plain-value-9']
  ])('takes the value of %j', (text, value) => {
    const m = assigned.exec(text)
    expect(m?.[2] ?? m?.[3]).toBe(value)
  })

  it.each(['password == other', 'token = abc', 'secret: '])('leaves %j (a comparison, or a value too short to be one)', (text) =>
    expect(redact(text)).toBe(text)
  )

  it('finds a base64 key body line of 64 characters, not a shorter line', () => {
    const re = new RegExp(KEY_BODY_LINE, 'm')
    const line = `Ab1${randomBytes(60).toString('base64').replace(/=+$/, '')}`.slice(0, 64)
    expect(re.test(`  ${line}`)).toBe(true)
    expect(re.test(line.slice(0, 32))).toBe(false)
  })
})
