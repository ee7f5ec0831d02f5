import type { Static } from 'typebox'
import type { Clip as CoreClip, CompactionStats, Reason as CoreReason } from '../compaction/index.js'
import type { Clip, Reason, Stats } from './schemas.js'

/**
 * The core cannot import TypeBox (it is pure), so the shapes it returns are TypeScript types there and
 * schemas here. These checks make the two one definition in effect: a field added, dropped, renamed or
 * retyped on either side fails `npm run typecheck` until the other side says the same.
 */
export type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
/** Compiles only when T is true. */
export type Agree<T extends true> = T

export type ContractAgreesWithCore = [
  Agree<Same<Static<typeof Stats>, CompactionStats>>,
  Agree<Same<Static<typeof Clip>, CoreClip>>,
  Agree<Same<Static<typeof Reason>, CoreReason>>
]
