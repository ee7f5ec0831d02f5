import { describe, expect, it } from 'vitest'
import { ASSIGNED_VALUE, KEY_BODY_LINE, SECRET_NAMES, SECRET_PATTERNS } from '../../src/compaction/secret-patterns.js'

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
    const samples: Record<string, string> = {
      anthropic_key: 'sk-ant-api03-abcdefghijklmnopqrstuv',
      google_api_key: `AIza${'A1b2C3d4E5'.repeat(3)}abcde`,
      jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c',
      aws_access_key: 'AKIAIOSFODNN7EXAMPLE',
      url_password: '://admin:hunter22@db.internal',
      docker_auth: '"auth": "dXNlcjpwYXNzd29yZA=="'
    }
    for (const [kind, sample] of Object.entries(samples)) {
      const p = SECRET_PATTERNS.find((x) => x.kind === kind)!
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
    ['token: ghx_0123456789', 'ghx_0123456789']
  ])('takes the value of %j', (text, value) => expect(assigned.exec(text)?.[2]).toBe(value))

  it.each(['password == other', 'token = abc', 'secret: '])('leaves %j (a comparison, or a value too short to be one)', (text) => expect(assigned.test(text)).toBe(false))

  it('finds a base64 key body line of 64 characters, not a shorter line', () => {
    const re = new RegExp(KEY_BODY_LINE, 'm')
    expect(re.test(`  ${'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7'.padEnd(64, 'x')}`)).toBe(true)
    expect(re.test('MIIEvQIBADANBgkqhkiG9w0BAQEFAASC')).toBe(false)
  })
})
