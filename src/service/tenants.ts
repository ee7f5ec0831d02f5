/**
 * The names of the tenants whose keys are given without one (COMPACT_API_KEYS): `key-` and 16 hex digits of
 * an HMAC of the key's SHA-256 under a salt the store keeps (made once, shared by every replica of the store),
 * never of the key alone, so that a name in the logs or a copied row cannot be checked against guessed keys
 * without the salt. A key whose tenant has data under the name earlier builds gave it (12 hex digits of the
 * key's SHA-256) keeps that name, said once at `warn`, so that nobody's sessions move; naming the key
 * `NAME=KEY` with that name keeps them for good.
 */
import { createHmac, randomBytes } from 'node:crypto'
import type { BaseLogger } from 'pino'
import { StoreUnavailableError } from '../contract/errors.js'
import type { Store } from '../storage/store.js'

/** Where the store keeps the salt. */
export const TENANT_SALT_STATE = 'gateway:tenant-salt'

/** The name an unnamed key's tenant has under `salt` (the key's SHA-256 given). */
export function saltedName(salt: Buffer, digest: Buffer): string {
  return `key-${createHmac('sha256', salt).update(digest).digest('hex').slice(0, 16)}`
}

/** The name earlier builds gave an unnamed key's tenant: 12 hex digits of the key's SHA-256. */
export function earlierName(digest: Buffer): string {
  return `key-${digest.toString('hex').slice(0, 12)}`
}

export class TenantNames {
  private readonly names = new Map<string, Promise<string>>()

  constructor(
    private readonly store: Pick<Store, 'firstState' | 'listSessions' | 'activity'>,
    private readonly log: Pick<BaseLogger, 'warn'>,
    private readonly now: () => number
  ) {}

  /** The tenant of an unnamed key, by its SHA-256: worked out once (again after a store fault). */
  of(digest: Buffer): Promise<string> {
    const id = digest.toString('base64')
    let name = this.names.get(id)
    if (!name) {
      name = this.work(digest).catch((err: unknown) => {
        this.names.delete(id)
        throw new StoreUnavailableError("an unnamed API key's tenant could not be named: the store is unavailable", err)
      })
      this.names.set(id, name)
    }
    return name
  }

  private async work(digest: Buffer): Promise<string> {
    const earlier = earlierName(digest)
    const [sessions, tallies] = await Promise.all([
      this.store.listSessions(earlier, { limit: 1 }),
      this.store.activity(earlier, null, { fromMs: 0, toMs: this.now() + 3_600_000 })
    ])
    if (sessions.sessions.length > 0 || tallies.length > 0) {
      this.log.warn(
        { event: 'tenant_named_by_key_hash', key_name: earlier },
        `an unnamed API key keeps its tenant's earlier name ${earlier} (a hash of the key alone) because the store holds its sessions; name the key ${earlier}=KEY in COMPACT_API_KEYS to keep them under that name for good`
      )
      return earlier
    }
    const kept = await this.store.firstState(TENANT_SALT_STATE, randomBytes(32).toString('base64'))
    if (typeof kept !== 'string') throw new Error(`the store's ${TENANT_SALT_STATE} is not a salt`)
    return saltedName(Buffer.from(kept, 'base64'), digest)
  }
}
