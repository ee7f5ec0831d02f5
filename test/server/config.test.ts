import { describe, expect, it } from 'vitest'
import { ConfigError, DEFAULT_BUDGET_TOKENS, loadConfig, parseApiKeys } from '../../src/server/config.js'

describe('loadConfig', () => {
  it('has the embedded defaults with nothing set, and ignores empty values', () => {
    const c = loadConfig({ PORT: '', LOG_LEVEL: '  ' })
    expect(c).toMatchObject({ PORT: 8080, HOST: '127.0.0.1', LOG_LEVEL: 'info', COMPACT_BUDGET: DEFAULT_BUDGET_TOKENS, COMPACT_KEEP_TURNS: 8, COMPACT_FALLBACK: 'extractive' })
    expect(c.ANTHROPIC_API_KEY).toBeUndefined()
  })

  it('converts numbers and takes "off" for the budget', () => {
    expect(loadConfig({ PORT: '9000', COMPACT_BUDGET: 'off', COMPACT_BODY_LIMIT_MB: '0.5' })).toMatchObject({ PORT: 9000, COMPACT_BUDGET: 'off', COMPACT_BODY_LIMIT_MB: 0.5 })
  })

  it.each([
    ['PORT', 'eighty', 'an integer'],
    ['PORT', '70000', 'at most 65535'],
    ['COMPACT_BUDGET', '10', 'at least 1000, or "off"'],
    ['LOG_LEVEL', 'loud', 'one of fatal, error'],
    ['COMPACT_FALLBACK', 'retry', 'one of extractive, error'],
    ['ANTHROPIC_BASE_URL', 'localhost:9', 'an http(s) URL'],
    ['COMPACT_KEEP_TURNS', '0', 'at least 1'],
    ['COMPACT_SUMMARIZER_TIMEOUT_MS', '1.5', 'an integer'],
    ['COMPACT_ALLOW_NO_AUTH', 'yes', '0 or 1']
  ])('refuses %s=%s, naming it', (name, value, expected) => {
    let error: unknown
    try {
      loadConfig({ [name]: value })
    } catch (err) {
      error = err
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).variable).toBe(name)
    expect((error as Error).message).toContain(`invalid ${name} (got ${JSON.stringify(value)})`)
    expect((error as Error).message).toContain(expected)
  })
})

describe('parseApiKeys', () => {
  it('names keys, by name=key or by position', () => {
    expect([...parseApiKeys(' ci=abc , def ,')]).toEqual([
      ['abc', 'ci'],
      ['def', 'key2']
    ])
    expect(parseApiKeys(undefined).size).toBe(0)
  })

  it('refuses an empty key', () => {
    expect(() => parseApiKeys('ci=')).toThrow(/entry 1 has an empty key/)
  })
})
