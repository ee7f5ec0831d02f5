/**
 * Session keys as the stores keep them: wrapped under a master key the operator gives (COMPACT_MASTER_KEY, or
 * a file or a command that yields it), which is never written with the data, so that a copied database file,
 * a backup or a replica opens nothing without it. Without a master key the keys are kept as they are (the
 * embedded default: the gateway runs, and says so).
 *
 * A key as stored is one of:
 * - 32 bytes: a key of an earlier build, used as it is for both the sealing and the index;
 * - 0x01 and a 32-byte secret: a key not wrapped; the sealing key and the index's key are derived from the
 *   secret apart (HKDF-SHA-256, two labels), so that neither opens what the other locks;
 * - 0x02, the master key's id (8 bytes), a nonce, a tag, and one of the two forms above sealed with
 *   AES-256-GCM under a key derived from the master key, the row's owner as associated data (a wrapped key
 *   moved to another row opens nothing).
 *
 * Rotation: the new master key is given as the current one and the old one as previous; both open keys
 * meanwhile, new keys are wrapped under the current one, and `rewrap` (server/rewrap.ts) wraps every key
 * under it; then the previous one can go.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'

/** The master keys, as bytes a worker thread can be given too. */
export interface KeyMaterial {
  current?: Uint8Array | undefined
  previous?: Uint8Array[] | undefined
}

export class KeyUnavailableError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'KeyUnavailableError'
  }
}

const LEGACY_BYTES = 32
const SECRET_BYTES = 32
const PLAIN = 0x01
const WRAPPED = 0x02
const ID_BYTES = 8
const IV_BYTES = 12
const TAG_BYTES = 16

const derive = (ikm: Uint8Array, label: string): Buffer => Buffer.from(hkdfSync('sha256', ikm, Buffer.alloc(0), label, 32))

interface Master {
  id: Buffer
  wrap: Buffer
}

function master(material: Uint8Array): Master {
  return {
    id: createHash('sha256').update(derive(material, 'compaction-gateway master key id')).digest().subarray(0, ID_BYTES),
    wrap: derive(material, 'compaction-gateway key wrap')
  }
}

const aad = (owner: string): Buffer => Buffer.from(`compaction-gateway session key\u0000${owner}`)

export class KeyRing {
  private readonly current: Master | undefined
  private readonly masters: Master[]

  constructor(readonly material: KeyMaterial = {}) {
    this.current = material.current ? master(material.current) : undefined
    this.masters = [...(this.current ? [this.current] : []), ...(material.previous ?? []).map(master)]
  }

  /** Whether keys are wrapped under a master key (one is given). */
  get wrapped(): boolean {
    return this.current !== undefined
  }

  /** The current master key's id (hex), for the start-up line and readiness; undefined without one. */
  get id(): string | undefined {
    return this.current?.id.toString('hex')
  }

  /** A new session key as the store keeps it: a fresh secret, wrapped where there is a master key. */
  fresh(owner: string): Buffer {
    const plain = Buffer.concat([Buffer.of(PLAIN), randomBytes(SECRET_BYTES)])
    return this.current ? this.wrap(this.current, owner, plain) : plain
  }

  /**
   * The key a session's rows are sealed with, from its stored form: 32 bytes (one key for both uses) or 64
   * (the sealing key, then the index's). Throws KeyUnavailableError where no master key given opens it.
   */
  open(owner: string, stored: Uint8Array): Buffer {
    const bytes = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength)
    if (bytes.length === LEGACY_BYTES) return bytes
    if (bytes.length === 1 + SECRET_BYTES && bytes[0] === PLAIN) {
      const secret = bytes.subarray(1)
      return Buffer.concat([derive(secret, 'compaction-gateway sealing'), derive(secret, 'compaction-gateway index')])
    }
    if (bytes[0] !== WRAPPED) throw new KeyUnavailableError('a session key is stored in a form this build does not know')
    return this.open(owner, this.unwrap(owner, bytes))
  }

  /** The stored form wrapped under the current master key, or undefined where it already is (or there is none to wrap under). */
  rewrap(owner: string, stored: Uint8Array): Buffer | undefined {
    if (!this.current) return undefined
    const bytes = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength)
    if (bytes[0] === WRAPPED && bytes.length > 1 + ID_BYTES && bytes.subarray(1, 1 + ID_BYTES).equals(this.current.id)) return undefined
    const inner = bytes[0] === WRAPPED && bytes.length !== LEGACY_BYTES ? this.unwrap(owner, bytes) : bytes
    return this.wrap(this.current, owner, inner)
  }

  private wrap(m: Master, owner: string, inner: Buffer): Buffer {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', m.wrap, iv)
    cipher.setAAD(aad(owner))
    const body = Buffer.concat([cipher.update(inner), cipher.final()])
    return Buffer.concat([Buffer.of(WRAPPED), m.id, iv, cipher.getAuthTag(), body])
  }

  private unwrap(owner: string, bytes: Buffer): Buffer {
    const id = bytes.subarray(1, 1 + ID_BYTES)
    const m = this.masters.find((k) => k.id.equals(id))
    if (!m)
      throw new KeyUnavailableError(
        this.current
          ? `a session key is wrapped under a master key not given (id ${id.toString('hex')}): give it as COMPACT_MASTER_KEY_PREVIOUS`
          : 'a session key is wrapped under a master key: set COMPACT_MASTER_KEY'
      )
    const at = 1 + ID_BYTES
    const decipher = createDecipheriv('aes-256-gcm', m.wrap, bytes.subarray(at, at + IV_BYTES))
    decipher.setAAD(aad(owner))
    decipher.setAuthTag(bytes.subarray(at + IV_BYTES, at + IV_BYTES + TAG_BYTES))
    try {
      return Buffer.concat([decipher.update(bytes.subarray(at + IV_BYTES + TAG_BYTES)), decipher.final()])
    } catch {
      throw new KeyUnavailableError('a session key does not open under the master key that wrapped it: it was changed, or moved from another row')
    }
  }
}

/** The part of a session's key that seals its texts. */
export const sealingKey = (key: Buffer): Buffer => (key.length === 2 * SECRET_BYTES ? key.subarray(0, SECRET_BYTES) : key)
/** The part of a session's key that makes its index terms. */
export const indexKey = (key: Buffer): Buffer => (key.length === 2 * SECRET_BYTES ? key.subarray(SECRET_BYTES) : key)
