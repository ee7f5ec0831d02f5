import { type Static, Type } from 'typebox'
import { Value } from 'typebox/value'
import { compiledCheck } from '../contract/validation.js'
import { summarizerKind, summarizerProblem } from '../summarizer/index.js'
import {
  DEFAULT_AUTH_FAILURES_PER_MIN,
  DEFAULT_BODY_LIMIT_MB,
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_BUDGET_TOKENS,
  DEFAULT_CACHE_TTL_S,
  DEFAULT_DB,
  DEFAULT_HOST,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_KEEP_TURNS,
  DEFAULT_MAX_INFLIGHT_MB,
  DEFAULT_MAX_SUMMARIES,
  DEFAULT_MODEL,
  DEFAULT_PORT,
  DEFAULT_PRECOMPUTE_AT,
  DEFAULT_PRICE_CURRENCY,
  DEFAULT_PRICES_PER_MTOK,
  DEFAULT_RATE_LIMIT_PER_MIN,
  DEFAULT_RETENTION_DAYS,
  MAX_SESSION_MEMORY_BYTES,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_SUMMARIZER_INPUT_TOKENS,
  DEFAULT_SUMMARIZER_TIMEOUT_MS,
  DEFAULT_SUMMARY_QUEUE,
  DEFAULT_TARGET_SHARE,
  DEFAULT_PROMPT_CACHE_S,
  DEFAULT_UPSTREAM_CONNECTIONS,
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  DEFAULT_WORKERS,
  DEFAULT_WORKER_MIN_KB,
  MODEL_WORKER_MIN_KB
} from '../contract/defaults.js'

/** false, true, a hop count, or a comma-separated list of addresses and CIDR ranges (Fastify's trustProxy). */
const TRUST_PROXY_PATTERN = '^(false|true|\\d{1,2}|[0-9a-fA-F:.]+(/\\d{1,3})?(\\s*,\\s*[0-9a-fA-F:.]+(/\\d{1,3})?)*)$'

const LogLevel = Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)))

/** The environment the service reads, as one schema: validation, defaults and the type at once. */
export const ConfigSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65_535, default: DEFAULT_PORT }),
  HOST: Type.String({ minLength: 1, default: DEFAULT_HOST }),
  COMPACT_PROBE_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65_535 })),
  LOG_LEVEL: Type.Unsafe<'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'>({ ...LogLevel, default: 'info' }),
  ANTHROPIC_API_KEY: Type.Optional(Type.String({ minLength: 1 })),
  ANTHROPIC_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  COMPACT_MODEL: Type.String({ minLength: 1, default: DEFAULT_MODEL }),
  COMPACT_SUMMARIZER: Type.Union(
    [Type.Literal('auto'), Type.Literal('anthropic'), Type.Literal('openai'), Type.Literal('gemini'), Type.Literal('extractive')],
    { default: 'auto' }
  ),
  COMPACT_PROXY_SUMMARIES: Type.Union([Type.Literal('auto'), Type.Literal('conversation'), Type.Literal('gateway')], { default: 'auto' }),
  COMPACT_FOLD_MODEL: Type.Optional(Type.String({ minLength: 1 })),
  OPENAI_API_KEY: Type.Optional(Type.String({ minLength: 1 })),
  OPENAI_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  GEMINI_API_KEY: Type.Optional(Type.String({ minLength: 1 })),
  GOOGLE_GEMINI_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  COMPACT_BUDGET: Type.Union([Type.Integer({ minimum: 1_000 }), Type.Literal('off')], { default: DEFAULT_BUDGET_TOKENS }),
  COMPACT_LIMIT: Type.Union([Type.Integer({ minimum: 1_000 }), Type.Literal('off')], { default: 'off' }),
  COMPACT_KEEP_TOKENS: Type.Optional(Type.Integer({ minimum: 100 })),
  COMPACT_KEEP_TURNS: Type.Integer({ minimum: 1, maximum: 1_000, default: DEFAULT_KEEP_TURNS }),
  COMPACT_API_KEYS: Type.Optional(Type.String()),
  COMPACT_BODY_LIMIT_MB: Type.Number({ exclusiveMinimum: 0, maximum: 1_024, default: DEFAULT_BODY_LIMIT_MB }),
  COMPACT_DB: Type.String({ minLength: 1, default: DEFAULT_DB }),
  COMPACT_REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  COMPACT_CACHE_TTL_S: Type.Integer({ minimum: 0, maximum: 31_536_000, default: DEFAULT_CACHE_TTL_S }),
  COMPACT_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 36_500, default: DEFAULT_RETENTION_DAYS }),
  COMPACT_MASTER_KEY: Type.Optional(Type.String({ minLength: 1 })),
  COMPACT_MASTER_KEY_FILE: Type.Optional(Type.String({ minLength: 1 })),
  COMPACT_MASTER_KEY_COMMAND: Type.Optional(Type.String({ minLength: 1 })),
  COMPACT_MASTER_KEY_PREVIOUS: Type.Optional(Type.String({ minLength: 1 })),
  COMPACT_MEMORY_SESSION_MB: Type.Number({ exclusiveMinimum: 0, maximum: 1_048_576, default: MAX_SESSION_MEMORY_BYTES / 1_048_576 }),
  COMPACT_RECALL: Type.Union([Type.Literal('auto'), Type.Literal('mcp'), Type.Literal('off')], { default: 'auto' }),
  COMPACT_SUMMARIZER_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: DEFAULT_SUMMARIZER_TIMEOUT_MS }),
  COMPACT_SUMMARIZER_INPUT_TOKENS: Type.Integer({ minimum: 2_000, maximum: 1_000_000, default: DEFAULT_SUMMARIZER_INPUT_TOKENS }),
  COMPACT_FALLBACK: Type.Union([Type.Literal('extractive'), Type.Literal('error')], { default: 'extractive' }),
  COMPACT_ALLOW_NO_AUTH: Type.Union([Type.Literal('0'), Type.Literal('1')], { default: '0' }),
  COMPACT_MAX_SUMMARIES: Type.Integer({ minimum: 1, maximum: 1_000, default: DEFAULT_MAX_SUMMARIES }),
  COMPACT_SUMMARY_QUEUE: Type.Integer({ minimum: 0, maximum: 10_000, default: DEFAULT_SUMMARY_QUEUE }),
  COMPACT_RATE_LIMIT_PER_MIN: Type.Integer({ minimum: 1, maximum: 1_000_000, default: DEFAULT_RATE_LIMIT_PER_MIN }),
  COMPACT_SHUTDOWN_GRACE_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: DEFAULT_SHUTDOWN_GRACE_MS }),
  COMPACT_IDLE_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: DEFAULT_IDLE_TIMEOUT_MS }),
  COMPACT_BODY_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 3_600_000, default: DEFAULT_BODY_TIMEOUT_MS }),
  COMPACT_AUTH_FAILURES_PER_MIN: Type.Integer({ minimum: 1, maximum: 1_000_000, default: DEFAULT_AUTH_FAILURES_PER_MIN }),
  COMPACT_TRUST_PROXY: Type.String({ pattern: TRUST_PROXY_PATTERN, default: 'false' }),
  COMPACT_WORKERS: Type.Integer({ minimum: 0, maximum: 64, default: DEFAULT_WORKERS }),
  COMPACT_WORKER_MIN_KB: Type.Integer({ minimum: 0, maximum: 1_048_576, default: DEFAULT_WORKER_MIN_KB }),
  COMPACT_MAX_INFLIGHT_MB: Type.Number({ exclusiveMinimum: 0, maximum: 65_536, default: DEFAULT_MAX_INFLIGHT_MB }),
  COMPACT_UPSTREAM_TIMEOUT_MS: Type.Integer({ minimum: 1_000, maximum: 3_600_000, default: DEFAULT_UPSTREAM_TIMEOUT_MS }),
  COMPACT_UPSTREAM_CONNECTIONS: Type.Integer({ minimum: 1, maximum: 10_000, default: DEFAULT_UPSTREAM_CONNECTIONS }),
  COMPACT_PRECOMPUTE_AT: Type.Union([Type.Number({ exclusiveMinimum: 0, maximum: 1 }), Type.Literal('off')], { default: DEFAULT_PRECOMPUTE_AT }),
  COMPACT_PROMPT_CACHE_S: Type.Union([Type.Integer({ minimum: 1, maximum: 86_400 }), Type.Literal('off')], { default: DEFAULT_PROMPT_CACHE_S }),
  COMPACT_TARGET_SHARE: Type.Number({ minimum: 0.1, maximum: 0.9, default: DEFAULT_TARGET_SHARE }),
  COMPACT_CONTROL_SHARE: Type.Number({ minimum: 0, maximum: 1, default: 0 }),
  COMPACT_STRATEGY: Type.Union([Type.Literal('summarize'), Type.Literal('clear'), Type.Literal('hybrid')], { default: 'summarize' }),
  COMPACT_CONTEXT_MANAGEMENT: Type.Union([Type.Literal('auto'), Type.Literal('gateway'), Type.Literal('forward')], { default: 'auto' }),
  COMPACT_PRICE_INPUT: Type.Number({ minimum: 0, maximum: 10_000, default: DEFAULT_PRICES_PER_MTOK.input }),
  COMPACT_PRICE_OUTPUT: Type.Number({ minimum: 0, maximum: 10_000, default: DEFAULT_PRICES_PER_MTOK.output }),
  COMPACT_PRICE_CACHE_WRITE: Type.Number({ minimum: 0, maximum: 10_000, default: DEFAULT_PRICES_PER_MTOK.cache_write }),
  COMPACT_PRICE_CACHE_READ: Type.Number({ minimum: 0, maximum: 10_000, default: DEFAULT_PRICES_PER_MTOK.cache_read }),
  COMPACT_PRICE_CURRENCY: Type.String({ pattern: '^[A-Z]{3}$', default: DEFAULT_PRICE_CURRENCY })
})

export type Config = Static<typeof ConfigSchema>

/** Gemini's API when GOOGLE_GEMINI_BASE_URL is not set (the one Gemini CLI and Google's SDK call). */
export const DEFAULT_GEMINI_BASE_URL = 'https://generativelanguage.googleapis.com'

/** The OpenAI API the openai summarizer calls when OPENAI_BASE_URL is not set (the SDK's own default). */
export const DEFAULT_OPENAI_BASE_URL = 'https://api.openai.com/v1'

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string
  ) {
    super(message)
    this.name = 'ConfigError'
  }
}

/**
 * Reads the configuration from an environment, once, at start-up. Unset and empty variables take their
 * defaults; a bad value throws a ConfigError naming the variable and what it must be.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const picked: Record<string, string> = {}
  for (const key of Object.keys(ConfigSchema.properties)) {
    const v = env[key]
    if (v !== undefined && v.trim() !== '') picked[key] = v.trim()
  }
  // Default and Convert work in place (the text of the environment made the schema's types, then checked as every
  // schema is: contract/validation.ts); `picked` keeps the strings as given, for the error message.
  const value = Value.Convert(ConfigSchema, Value.Default(ConfigSchema, { ...picked }))
  const check = compiledCheck<Config>(ConfigSchema)
  if (check(value)) {
    const problem = summarizerProblem(value)
    if (problem) throw new ConfigError('COMPACT_SUMMARIZER', problem)
    if (typeof value.COMPACT_LIMIT === 'number' && (value.COMPACT_BUDGET === 'off' || value.COMPACT_LIMIT <= value.COMPACT_BUDGET))
      throw new ConfigError(
        'COMPACT_LIMIT',
        `invalid COMPACT_LIMIT (got ${value.COMPACT_LIMIT}): a bound above COMPACT_BUDGET (${value.COMPACT_BUDGET}), the budget then a target`
      )
    return value
  }
  const first = check.errors?.[0]
  const variable = first?.instancePath.replace(/^\//, '') || 'environment'
  const shown = variable in picked ? ` (got ${JSON.stringify(picked[variable])})` : ''
  throw new ConfigError(variable, `invalid ${variable}${shown}: ${describe(variable)}`)
}

function describe(variable: string): string {
  const schema = (ConfigSchema.properties as unknown as Record<string, Record<string, unknown>>)[variable]
  if (!schema) return 'unknown setting'
  if (variable === 'COMPACT_BUDGET') return 'an integer of at least 1000, or "off"'
  if (variable === 'COMPACT_LIMIT') return 'an integer of at least 1000 (above COMPACT_BUDGET), or "off"'
  if (variable === 'LOG_LEVEL') return 'one of fatal, error, warn, info, debug, trace, silent'
  if (variable === 'COMPACT_PRECOMPUTE_AT') return 'a share of the budget above 0 and at most 1, or "off"'
  if (variable === 'COMPACT_TARGET_SHARE') return 'a share from 0.1 to 0.9'
  if (variable === 'COMPACT_CONTROL_SHARE') return 'a share from 0 to 1'
  if (variable === 'COMPACT_PROMPT_CACHE_S') return 'seconds from 1 to 86400, or "off"'
  if (variable === 'COMPACT_PRICE_CURRENCY') return 'a currency code of three capitals (USD, EUR, ...)'
  if (variable.startsWith('COMPACT_PRICE_')) return 'a price per million tokens, from 0 to 10000'
  if (variable === 'COMPACT_FALLBACK') return 'one of extractive, error'
  if (variable === 'COMPACT_STRATEGY') return 'one of summarize, clear, hybrid'
  if (variable === 'COMPACT_CONTEXT_MANAGEMENT') return 'one of auto, gateway, forward'
  if (variable === 'COMPACT_ALLOW_NO_AUTH') return '0 or 1'
  if (variable === 'ANTHROPIC_BASE_URL' || variable === 'OPENAI_BASE_URL' || variable === 'GOOGLE_GEMINI_BASE_URL') return 'an http(s) URL'
  if (variable === 'COMPACT_SUMMARIZER') return 'one of auto, anthropic, openai, gemini, extractive'
  if (variable === 'COMPACT_REDIS_URL') return 'a redis:// or rediss:// URL'
  if (variable === 'COMPACT_TRUST_PROXY') return 'false, true, a number of proxy hops, or a comma-separated list of proxy addresses or CIDR ranges'
  const range = [
    schema.minimum !== undefined ? `at least ${String(schema.minimum)}` : undefined,
    schema.exclusiveMinimum !== undefined ? `above ${String(schema.exclusiveMinimum)}` : undefined,
    schema.maximum !== undefined ? `at most ${String(schema.maximum)}` : undefined
  ].filter(Boolean)
  const kind = schema.type === 'integer' ? 'an integer' : schema.type === 'number' ? 'a number' : 'a non-empty string'
  return range.length ? `${kind}, ${range.join(' and ')}` : kind
}

/** The keys a client may present, by name. `name=key` names a client; a bare key is named by its position. */
/** A tenant's name in COMPACT_API_KEYS: what records, logs and metrics show, never the key. */
const KEY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/
/**
 * The shortest key taken: a shorter one can be guessed (or is a typo, or the tail of a key split at its `=`);
 * `openssl rand -hex 16` makes one of 32.
 */
export const MIN_KEY_CHARS = 16

/**
 * COMPACT_API_KEYS as a map from key to tenant name. An entry is `name=key`, or a key alone, whose tenant is
 * then named by a keyed hash of the key, worked out when the key is first used (undefined here; server/tenants.ts):
 * a tenant never depends on where its key stands in the list, so dropping or adding a key moves nobody's
 * sessions to another. Refused at start-up, naming the entry and never the key: a key shorter than
 * MIN_KEY_CHARS (so a base64 key's `==` is never read as `name=key`), a name given to two keys, or one key given twice.
 */
export function parseApiKeys(raw: string | undefined): Map<string, string | undefined> {
  const keys = new Map<string, string | undefined>()
  if (!raw) return keys
  const named = new Set<string>()
  const fail = (i: number, why: string): never => {
    throw new ConfigError('COMPACT_API_KEYS', `invalid COMPACT_API_KEYS: entry ${i + 1} ${why}`)
  }
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .forEach((entry, i) => {
      const eq = entry.indexOf('=')
      const prefix = eq > 0 ? entry.slice(0, eq).trim() : ''
      const isNamed = eq > 0 && KEY_NAME.test(prefix)
      const key = isNamed ? entry.slice(eq + 1).trim() : entry
      if (key === '') fail(i, 'has an empty key')
      if (key.length < MIN_KEY_CHARS) {
        fail(
          i,
          isNamed
            ? `has a key shorter than ${MIN_KEY_CHARS} characters; if the whole entry is one key (a base64 key ends in "="), give it a name: NAME=KEY`
            : `is shorter than ${MIN_KEY_CHARS} characters (a key that short can be guessed: \`openssl rand -hex 16\` makes one of 32)`
        )
      }
      if (keys.has(key)) fail(i, 'repeats a key given before')
      if (isNamed && named.has(prefix)) fail(i, `names a tenant "${prefix}" another key has: each key has a name of its own`)
      if (isNamed) named.add(prefix)
      keys.set(key, isNamed ? prefix : undefined)
    })
  return keys
}

/** COMPACT_TRUST_PROXY as Fastify's `trustProxy` option takes it. */
export function trustProxy(raw: string): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (raw === 'false') return false
  if (raw === 'true') return true
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw)
    return (_address, hop) => hop < hops // trust this many proxies in front of the server
  }
  return raw.split(',').map((s) => s.trim())
}

/** A URL's place without its credentials or query: `host:port/path`. */
function place(url: string): string {
  try {
    const u = new URL(url)
    return `${u.host}${u.pathname === '/' ? '' : u.pathname}`
  } catch {
    return 'an unreadable URL'
  }
}

/**
 * One line that says how this process is set up (no secret in it): the store, Redis, the summarizer and
 * its model, the workers, the budget and whether keys are checked. Logged once the server listens.
 */
/**
 * Who writes a proxied conversation's summaries (COMPACT_PROXY_SUMMARIES):
 * - `conversation`: the conversation's own model, asked in the conversation itself with the credentials it is
 *   forwarded with (the client's, or the gateway's own key): its prefix is the one the forwarded requests wrote
 *   to the provider's prompt cache, so the call reads it at the cache's price;
 * - `gateway`: the gateway's summarizer (COMPACT_SUMMARIZER, COMPACT_MODEL), a transcript of the span written
 *   afresh, uncached; where the gateway has no model, the conversation's as above;
 * - `auto`: `conversation` when COMPACT_SUMMARIZER is `auto`, `gateway` when it names a summarizer.
 * COMPACT_SUMMARIZER=extractive keeps every summary extractive.
 */
export function proxySummaries(
  config: Pick<Config, 'COMPACT_SUMMARIZER' | 'COMPACT_PROXY_SUMMARIES' | 'ANTHROPIC_API_KEY'>
): 'conversation' | 'gateway' | 'extractive' {
  if (config.COMPACT_SUMMARIZER === 'extractive') return 'extractive'
  const chosen =
    config.COMPACT_PROXY_SUMMARIES === 'auto' ? (config.COMPACT_SUMMARIZER === 'auto' ? 'conversation' : 'gateway') : config.COMPACT_PROXY_SUMMARIES
  return chosen === 'gateway' && summarizerKind(config) !== 'extractive' ? 'gateway' : 'conversation'
}

export function setupLine(config: Config, keys: number, masterKeyId?: string): string {
  const store = /^postgres(?:ql)?:\/\//.test(config.COMPACT_DB) ? `postgresql ${place(config.COMPACT_DB)}` : `sqlite ${config.COMPACT_DB}`
  const redis = config.COMPACT_REDIS_URL ? `redis ${place(config.COMPACT_REDIS_URL)}` : 'redis off'
  const kind = summarizerKind(config)
  const at = kind === 'anthropic' ? config.ANTHROPIC_BASE_URL : kind === 'openai' ? (config.OPENAI_BASE_URL ?? DEFAULT_OPENAI_BASE_URL) : undefined
  const fold = config.COMPACT_FOLD_MODEL ? `, folding with ${config.COMPACT_FOLD_MODEL}` : ''
  const proxied =
    proxySummaries(config) === 'conversation'
      ? kind === 'extractive'
        ? ` (no ANTHROPIC_API_KEY; proxied conversations summarized by the client's own model, COMPACT_SUMMARIZER=extractive to turn off)`
        : `, proxied conversations by their own model from the prompt cache (COMPACT_PROXY_SUMMARIES=gateway for ${config.COMPACT_MODEL})`
      : ''
  const summarizer =
    kind === 'extractive'
      ? `summarizer extractive${proxied}`
      : `summarizer ${kind} ${config.COMPACT_MODEL}${at ? ` at ${place(at)}` : ''}${fold} (fallback ${config.COMPACT_FALLBACK})${proxied}`
  const minKb = kind === 'extractive' ? config.COMPACT_WORKER_MIN_KB : Math.min(config.COMPACT_WORKER_MIN_KB, MODEL_WORKER_MIN_KB)
  const workers = config.COMPACT_WORKERS > 0 ? `${config.COMPACT_WORKERS} workers (bodies from ${minKb} KB)` : 'compactions inline'
  const budget = config.COMPACT_BUDGET === 'off' ? 'budget off' : `budget ${config.COMPACT_BUDGET} tokens`
  const auth = keys > 0 ? `${keys} API key${keys === 1 ? '' : 's'}` : 'no API keys (open)'
  const sealing = masterKeyId ? `session keys wrapped (master key ${masterKeyId})` : 'session keys not wrapped (no COMPACT_MASTER_KEY)'
  return `${store}, ${redis}, ${summarizer}, ${workers}, ${budget}, ${auth}, ${sealing}`
}
