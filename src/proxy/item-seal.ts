/**
 * The gateway's own compaction items and blocks (a Responses `compaction` item's `encrypted_content`, a
 * Messages `compaction` block's `encrypted_content` and `signature`) hold the compacted history the gateway
 * reads back on the next request. They are sealed: encrypted and authenticated (AES-256-GCM) under a key of
 * the gateway's, the tenant's name as associated data, so that a client reads nothing of them, a changed one
 * is refused (a 400 naming its field), and one tenant's item opens nothing for another.
 *
 * The key is derived from the master key where the operator gives one (the previous master keys open items
 * too while a rotation runs), else from a secret the store keeps (made once, shared by the replicas).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

/** How a sealed item of the gateway's begins. */
export const SEALED_ITEM = 'cgw2.'
/** How an earlier build's items began (the history in base64, not sealed): never read as the gateway's own. */
export const UNSEALED_ITEM = 'cgw1.'

const IV_BYTES = 12
const TAG_BYTES = 16
const LABEL = 'compaction-gateway compaction items'

/** The item key derived from a secret (a master key, the store's secret). */
export function itemKey(secret: Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), LABEL, 32))
}

const aad = (tenant: string): Buffer => Buffer.from(`compaction-gateway item\u0000${tenant}`)

/** One tenant's sealing of the gateway's items. */
export interface TenantSeal {
  /** The text sealed, as an item's field holds it (SEALED_ITEM, then base64url). */
  seal(text: string): string
  /** The text an item's field holds: undefined where it is not the gateway's sealed item for this tenant (changed, another key's, another tenant's). */
  open(field: string): string | undefined
}

/** Sealing under the first key, opening under any. */
export function tenantSeal(keys: readonly Buffer[], tenant: string): TenantSeal {
  const first = keys[0]
  if (first === undefined) throw new Error('an item seal needs a key')
  const data = aad(tenant)
  return {
    seal(text) {
      const iv = randomBytes(IV_BYTES)
      const cipher = createCipheriv('aes-256-gcm', first, iv)
      cipher.setAAD(data)
      const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()])
      return `${SEALED_ITEM}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`
    },
    open(field) {
      if (!field.startsWith(SEALED_ITEM)) return undefined
      const encoded = field.slice(SEALED_ITEM.length)
      const bytes = Buffer.from(encoded, 'base64url')
      // only the one encoding of the bytes: a decoder ignores a last character's spare bits and what is not base64url
      if (bytes.length < IV_BYTES + TAG_BYTES || bytes.toString('base64url') !== encoded) return undefined
      for (const key of keys) {
        try {
          const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES))
          decipher.setAAD(data)
          decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
          return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8')
        } catch {
          // not this key's: the next, if any
        }
      }
      return undefined
    }
  }
}
