/**
 * The master key that wraps the session keys (storage/keyring.ts), as the operator gives it: the value
 * itself (COMPACT_MASTER_KEY), a file that holds it (COMPACT_MASTER_KEY_FILE: a mounted secret), or a command
 * whose output is it (COMPACT_MASTER_KEY_COMMAND: a KMS's or a vault's client), read once at start-up; and
 * the one it replaces during a rotation (COMPACT_MASTER_KEY_PREVIOUS). Never logged, never stored.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import type { KeyMaterial } from '../storage/keyring.js'
import { type Config, ConfigError } from './config.js'

/** The shortest master key taken: 32 characters (`openssl rand -base64 32` makes one of 44). */
export const MIN_MASTER_KEY_CHARS = 32
/** How long a key command may take. */
const COMMAND_TIMEOUT_MS = 15_000

type Given = Pick<Config, 'COMPACT_MASTER_KEY' | 'COMPACT_MASTER_KEY_FILE' | 'COMPACT_MASTER_KEY_COMMAND' | 'COMPACT_MASTER_KEY_PREVIOUS'>

function checked(variable: string, value: string): Buffer {
  const key = value.trim()
  if (key.length < MIN_MASTER_KEY_CHARS)
    throw new ConfigError(
      variable,
      `invalid ${variable}: the master key is shorter than ${MIN_MASTER_KEY_CHARS} characters (\`openssl rand -base64 32\` makes one)`
    )
  return Buffer.from(key, 'utf8')
}

/** The master keys the configuration gives (none: the session keys are kept unwrapped). Throws a ConfigError naming the setting that fails. */
export function masterKeys(config: Given): KeyMaterial {
  const given = (['COMPACT_MASTER_KEY', 'COMPACT_MASTER_KEY_FILE', 'COMPACT_MASTER_KEY_COMMAND'] as const).filter((v) => config[v] !== undefined)
  if (given.length > 1) throw new ConfigError(given[1] as string, `invalid ${given[1]}: give the master key one way, not ${given.join(' and ')}`)
  let current: Buffer | undefined
  if (config.COMPACT_MASTER_KEY !== undefined) current = checked('COMPACT_MASTER_KEY', config.COMPACT_MASTER_KEY)
  if (config.COMPACT_MASTER_KEY_FILE !== undefined) {
    let text: string
    try {
      text = readFileSync(config.COMPACT_MASTER_KEY_FILE, 'utf8')
    } catch (err) {
      throw new ConfigError('COMPACT_MASTER_KEY_FILE', `invalid COMPACT_MASTER_KEY_FILE: cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
    current = checked('COMPACT_MASTER_KEY_FILE', text)
  }
  if (config.COMPACT_MASTER_KEY_COMMAND !== undefined) {
    let out: string
    try {
      out = execFileSync('/bin/sh', ['-c', config.COMPACT_MASTER_KEY_COMMAND], {
        encoding: 'utf8',
        timeout: COMMAND_TIMEOUT_MS,
        stdio: ['ignore', 'pipe', 'pipe']
      })
    } catch (err) {
      const status = (err as { status?: number | null }).status
      throw new ConfigError(
        'COMPACT_MASTER_KEY_COMMAND',
        `invalid COMPACT_MASTER_KEY_COMMAND: the command failed (${status !== undefined && status !== null ? `exit status ${status}` : 'it did not finish'})`
      )
    }
    current = checked('COMPACT_MASTER_KEY_COMMAND', out)
  }
  const previous = config.COMPACT_MASTER_KEY_PREVIOUS !== undefined ? [checked('COMPACT_MASTER_KEY_PREVIOUS', config.COMPACT_MASTER_KEY_PREVIOUS)] : []
  if (previous.length > 0 && !current)
    throw new ConfigError('COMPACT_MASTER_KEY_PREVIOUS', 'invalid COMPACT_MASTER_KEY_PREVIOUS: a previous master key is only taken beside the current one')
  return { ...(current ? { current } : {}), ...(previous.length > 0 ? { previous } : {}) }
}
