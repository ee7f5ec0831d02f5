/** `compaction-gateway rewrap`: the store's session keys wrapped under the current master key (storage/rewrap.ts), the settings the service's. */
import { KeyRing } from '../storage/keyring.js'
import { rewrapKeys } from '../storage/rewrap.js'
import { ConfigError, loadConfig } from './config.js'
import { masterKeys } from './master-key.js'

export async function rewrap(): Promise<void> {
  let config
  let ring
  try {
    config = loadConfig()
    ring = new KeyRing(masterKeys(config))
    if (!ring.wrapped) throw new ConfigError('COMPACT_MASTER_KEY', 'rewrap needs the master key to wrap under: set COMPACT_MASTER_KEY (or _FILE, or _COMMAND)')
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`compaction-gateway: ${err.message}\n`)
      process.exit(78)
    }
    throw err
  }
  const done = await rewrapKeys(config.COMPACT_DB, ring)
  process.stdout.write(`${done.keys} session keys; ${done.rewrapped} wrapped anew under master key ${ring.id ?? ''}\n`)
}
