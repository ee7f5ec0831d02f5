import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig, parseApiKeys, setupLine } from '../../src/server/config.js'
import { DEFAULT_BUDGET_TOKENS } from '../../src/contract/defaults.js'

describe('loadConfig', () => {
  it('has the embedded defaults with nothing set, and ignores empty values', () => {
    const c = loadConfig({ PORT: '', LOG_LEVEL: '  ' })
    expect(c).toMatchObject({
      PORT: 8080,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      COMPACT_BUDGET: DEFAULT_BUDGET_TOKENS,
      COMPACT_KEEP_TURNS: 8,
      COMPACT_FALLBACK: 'extractive'
    })
    expect(c.ANTHROPIC_API_KEY).toBeUndefined()
  })

  it('converts numbers and takes "off" for the budget', () => {
    expect(loadConfig({ PORT: '9000', COMPACT_BUDGET: 'off', COMPACT_BODY_LIMIT_MB: '0.5' })).toMatchObject({
      PORT: 9000,
      COMPACT_BUDGET: 'off',
      COMPACT_BODY_LIMIT_MB: 0.5
    })
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
  it('names keys by name=key, and leaves a key alone unnamed here (its tenant is named by a keyed hash when it is used)', () => {
    expect([...parseApiKeys(' ci=abcdefgh12345678 , unnamed-key-5678 ,')]).toEqual([
      ['abcdefgh12345678', 'ci'],
      ['unnamed-key-5678', undefined]
    ])
    expect(parseApiKeys(undefined).size).toBe(0)
  })

  it('takes a key with = in it (base64) when named, and never reads its tail as name=key', () => {
    expect(parseApiKeys('team=QUJDREVGR0hJSktM==').get('QUJDREVGR0hJSktM==')).toBe('team')
    expect(() => parseApiKeys('QUJDREVGR0hJSktM==')).toThrow(/entry 1 has a key shorter than 16 characters; .*give it a name: NAME=KEY/)
    // a prefix that is no name: the whole entry is the key
    expect([...parseApiKeys('a/b=cdefghijklmnop')]).toEqual([['a/b=cdefghijklmnop', undefined]])
  })

  it('refuses what would make two tenants one or one key two, naming the entry and never the key', () => {
    expect(() => parseApiKeys('ci=')).toThrow(/entry 1 has an empty key/)
    expect(() => parseApiKeys('a=first-key-000001,a=second-key-00002')).toThrow(/entry 2 names a tenant "a" another key has/)
    expect(() => parseApiKeys('a=same-key-00000001,b=same-key-00000001')).toThrow(/entry 2 repeats a key/)
    expect(() => parseApiKeys('short')).toThrow(/entry 1 is shorter than 16 characters \(a key that short can be guessed/)
    expect(() => parseApiKeys('ci=sixteen-chars-16')).not.toThrow()
    expect(() => parseApiKeys('ci=fifteen-chars-5')).toThrow(/entry 1 has a key shorter than 16 characters/)
    for (const raw of ['a=first-key-000001,a=second-key-00002', 'a=same-key-00000001,b=same-key-00000001', 'QUJDREVGR0hJSktM==']) {
      try {
        parseApiKeys(raw)
      } catch (err) {
        expect((err as Error).message).not.toMatch(/first-key|second-key|same-key|QUJD/)
      }
    }
  })
})

describe('setupLine', () => {
  it('names the store, Redis, summarizer, workers, budget and keys, and never a credential', () => {
    const line = setupLine(
      loadConfig({
        COMPACT_DB: 'postgres://gw:pg-secret-pass@db.internal:5432/compaction?sslmode=require',
        COMPACT_REDIS_URL: 'redis://:redis-secret-pass@cache.internal:6379/0',
        ANTHROPIC_API_KEY: 'sk-ant-not-in-the-line',
        COMPACT_MODEL: 'claude-haiku-4-5',
        COMPACT_WORKERS: '2',
        COMPACT_BUDGET: '120000',
        COMPACT_MASTER_KEY: 'a master key that never shows in the line'
      }),
      3,
      'c0ffee0123456789'
    )
    expect(line).toBe(
      'postgresql db.internal:5432/compaction, redis cache.internal:6379/0, summarizer anthropic claude-haiku-4-5 (fallback extractive), proxied conversations by their own model from the prompt cache (COMPACT_PROXY_SUMMARIES=gateway for claude-haiku-4-5), 2 workers (bodies from 32 KB), budget 120000 tokens, 3 API keys, session keys wrapped (master key c0ffee0123456789)'
    )
    for (const secret of ['pg-secret-pass', 'redis-secret-pass', 'sk-ant-not-in-the-line', 'sslmode', 'never shows']) expect(line).not.toContain(secret)
  })

  it("says where the gateway's model writes the proxied conversations' summaries too", () => {
    for (const env of [{ COMPACT_PROXY_SUMMARIES: 'gateway' }, { COMPACT_SUMMARIZER: 'anthropic' }])
      expect(setupLine(loadConfig({ ANTHROPIC_API_KEY: 'sk-ant-x', COMPACT_MODEL: 'claude-haiku-4-5', COMPACT_WORKERS: '0', ...env }), 0)).toContain(
        'summarizer anthropic claude-haiku-4-5 (fallback extractive), compactions inline'
      )
  })

  it('says so when there is no key for the model, no Redis and no API keys', () => {
    expect(setupLine(loadConfig({ COMPACT_DB: './data/c.db', COMPACT_WORKERS: '2', COMPACT_WORKER_MIN_KB: '256', COMPACT_BUDGET: 'off' }), 0)).toBe(
      "sqlite ./data/c.db, redis off, summarizer extractive (no ANTHROPIC_API_KEY; proxied conversations summarized by the client's own model, COMPACT_SUMMARIZER=extractive to turn off), 2 workers (bodies from 256 KB), budget off, no API keys (open), session keys not wrapped (no COMPACT_MASTER_KEY)"
    )
  })
})
