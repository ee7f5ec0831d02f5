/**
 * The keys the gateway's compaction items are sealed under (proxy/item-seal.ts): derived from the master key
 * where one is given (the previous ones open items too, while a rotation runs), else from a secret the store
 * keeps, made once and shared by every replica that shares the store. Read from the store on the first
 * request that may hold or make an item (never at start-up: a store that is away then stops nothing else).
 */
import { randomBytes } from 'node:crypto'
import { StoreUnavailableError } from '../contract/errors.js'
import { type TenantSeal, itemKey, tenantSeal } from '../proxy/item-seal.js'
import type { KeyMaterial } from '../storage/keyring.js'

/** Where the store keeps the items' secret. */
export const ITEM_SECRET_STATE = 'gateway:item-secret'

export class ItemSeals {
  private readonly masterKeys: Buffer[]
  private keys: Buffer[] | undefined
  private loading: Promise<void> | undefined

  constructor(
    master: KeyMaterial,
    /** The store's secret: the one kept, else this one kept from now on (Store.firstState). */
    private readonly keptSecret: (fresh: string) => Promise<unknown>
  ) {
    this.masterKeys = [master.current, ...(master.previous ?? [])].filter((k): k is Uint8Array => k !== undefined).map(itemKey)
  }

  /** Ready to seal and open: the store's secret read (once; tried again on the next request after a failure). */
  ready(): Promise<void> {
    if (this.keys) return Promise.resolve()
    this.loading ??= this.load().finally(() => {
      this.loading = undefined
    })
    return this.loading
  }

  private async load(): Promise<void> {
    let stored: Buffer | undefined
    try {
      const kept = await this.keptSecret(randomBytes(32).toString('base64'))
      if (typeof kept === 'string') stored = itemKey(Buffer.from(kept, 'base64'))
    } catch (err) {
      // with a master key, items seal without the store (the store's key only opens items sealed before it came)
      if (this.masterKeys.length === 0) throw new StoreUnavailableError('the key of compaction items could not be read from the store', err)
    }
    this.keys = [...this.masterKeys, ...(stored ? [stored] : [])]
  }

  /** A tenant's sealing; its use before `ready` has resolved is a fault of the caller's. */
  for(tenant: string): TenantSeal {
    const seal = (): TenantSeal => {
      if (!this.keys) throw new Error('compaction items sealed before their keys were read')
      return tenantSeal(this.keys, tenant)
    }
    return { seal: (text) => seal().seal(text), open: (field) => seal().open(field) }
  }
}
