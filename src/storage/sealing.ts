import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto'
import { stemmer } from 'stemmer'
import { QUESTION_WORDS } from './rank.js'
import { indexKey, sealingKey } from './keyring.js'

/**
 * What the stores keep of a session is sealed with a key of its own, so that deleting the session is
 * deleting its key: a few bytes, at once, whatever the session held and however large the store.
 *
 * - Texts (records, cold-layer entries, cached summaries and anchors, the session's own id) are kept
 *   encrypted (AES-256-GCM) under the session's key; none of them is written in clear.
 * - Rows name their session by its owner, a hash of the tenant and the session id, never by the id.
 * - The full-text index holds, for each word, an HMAC of its stem under the session's key: a search
 *   computes the same terms, so it matches the session's own entries only (the index narrows to the
 *   session by itself, and scores only them), and once the key is gone what the index and freed pages
 *   still hold of the session are hashes nobody can match or read.
 *
 * The key itself is one row, wrapped under the operator's master key where one is given (keyring.ts), and
 * deleted where its bytes are overwritten (SQLite's secure_delete and an emptied WAL; PostgreSQL's rewrite of
 * that small table alone, though its WAL, standbys and backups keep the old pages until they expire).
 */

export const KEY_BYTES = 32
const IV_BYTES = 12
const TAG_BYTES = 16

/** A new session key. */
export function newKey(): Buffer {
  return randomBytes(KEY_BYTES)
}

/** `text` encrypted under `key`: its nonce, its tag, then the ciphertext. */
export function seal(key: Buffer, text: string): Buffer {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', sealingKey(key), iv)
  const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body])
}

/** The text `seal` sealed; throws where the key is not the one it was sealed with, or the bytes were changed. */
export function unseal(key: Buffer, sealed: Uint8Array): string {
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength)
  const decipher = createDecipheriv('aes-256-gcm', sealingKey(key), bytes.subarray(0, IV_BYTES))
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
  return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8')
}

/** How rows name a tenant's session: a hash of both, so that neither is kept in clear beside the rows. */
export function ownerOf(keyName: string, sessionId: string): string {
  return createHash('sha256').update(keyName).update('\u0000').update(sessionId).digest('hex').slice(0, 32)
}

/**
 * How rows name a compaction made without a session: an owner of its own (no session id begins with NUL),
 * so that it is sealed under a key of its own like a session's, and deleting it by its id deletes that key.
 */
export function compactionOwner(keyName: string, compactionId: string): string {
  return ownerOf(keyName, `\u0000${compactionId}`)
}

/** Longest word indexed whole; past it, its first characters stand for it. */
const MAX_WORD = 64
const COMBINING = /\p{M}+/gu
const SEPARATORS = /[^\p{L}\p{N}]+/u

/**
 * The words of a text as the index knows them: lower case, without diacritics, split at anything but a
 * letter or a digit (so `parse_config` is `parse` and `config`), two characters at least, each stemmed
 * (English, Porter's): `failing` and `failed` are one word, `fail`.
 */
export function wordsOf(text: string, skip?: ReadonlySet<string>): string[] {
  const out: string[] = []
  for (const raw of text.normalize('NFKD').replace(COMBINING, '').toLowerCase().split(SEPARATORS)) {
    if (raw.length < 2 || skip?.has(raw)) continue
    const word = raw.length > MAX_WORD ? raw.slice(0, MAX_WORD) : raw
    out.push(/^[a-z]+$/.test(word) ? stemmer(word) : word)
  }
  return out
}

/** Most words of an entry that are indexed (PostgreSQL's tsvector holds at most 1 MB). */
export const MAX_TERMS = 20_000

/** Most words of a recall query that are searched for. */
export const MAX_QUERY_TERMS = 32

/**
 * A session's terms: each word's HMAC under the session key, written in the letters a to p only, so that
 * any full-text tokenizer (SQLite's ascii, PostgreSQL's simple parser) takes it as one plain word.
 * Memoized: a session's words repeat.
 */
export class Terms {
  private readonly known = new Map<string, string>()

  private readonly key: Buffer

  constructor(key: Buffer) {
    this.key = indexKey(key)
  }

  private term(word: string): string {
    let term = this.known.get(word)
    if (term === undefined) {
      const digest = createHmac('sha256', this.key).update(word).digest()
      term = 't'
      for (let i = 0; i < 8; i++) term += String.fromCharCode(97 + ((digest[i] ?? 0) >> 4), 97 + ((digest[i] ?? 0) & 15))
      if (this.known.size < 50_000) this.known.set(word, term)
    }
    return term
  }

  /** The text's terms, in order, separated by spaces (its first MAX_TERMS words): what the index is given for it. */
  of(text: string): string {
    return this.counted(text).terms
  }

  /** The text's terms as `of` gives them, and how many they are (the entry's length, for ranking). */
  counted(text: string): { terms: string; words: number } {
    const words = wordsOf(text).slice(0, MAX_TERMS)
    return { terms: words.map((w) => this.term(w)).join(' '), words: words.length }
  }

  /** A query's distinct terms (at most MAX_QUERY_TERMS), question words left out where it holds anything else: any of them matches. */
  query(text: string): string[] {
    const asked = wordsOf(text, QUESTION_WORDS)
    const words = asked.length > 0 ? asked : wordsOf(text)
    return [...new Set(words)].slice(0, MAX_QUERY_TERMS).map((w) => this.term(w))
  }
}
