import type { Worker } from 'node:worker_threads'
import type { KeyMaterial } from './keyring.js'
import { startThread } from '../threads/entry.js'
import type { SqliteReads, SqliteWrites } from './sqlite.js'
import { MAX_WRITE_BACKLOG } from '../contract/defaults.js'

/** The writes a SQLite store makes, by name, with their arguments and results. */
export type Writes = Pick<
  SqliteWrites,
  | 'saveRecord'
  | 'putCached'
  | 'firstState'
  | 'saveMemory'
  | 'addActivity'
  | 'deleteSession'
  | 'deleteCompaction'
  | 'deleteCold'
  | 'reclaim'
  | 'pruneSlice'
  | 'checkWritable'
>
/** The reads a SQLite store makes. */
export type Reads = Pick<SqliteReads, 'listRecords' | 'listSessions' | 'cached' | 'recall' | 'compaction' | 'entries' | 'timeline' | 'recap' | 'activity'>

type Method<T> = { [K in keyof T]: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T]
type Args<T, K extends Method<T>> = T[K] extends (...args: infer A) => unknown ? A : never
type Result<T, K extends Method<T>> = T[K] extends (...args: never[]) => infer R ? R : never

/** Where a store's reads or writes run: each answered when done (a write: when committed). */
export interface SqliteRunner<T> {
  run<K extends Method<T>>(name: K, args: Args<T, K>): Promise<Result<T, K>>
  /** Resolves when fewer than MAX_WRITE_BACKLOG operations wait: the caller may ask for more without the backlog growing. */
  room(): Promise<void>
  /** Resolves when every operation asked for so far is done and the thread is closed. */
  close(): Promise<void>
}

/** An operation asked of a store thread, and its answer. */
export interface ThreadRequest {
  id: number
  name: string
  args: unknown[]
}
export type ThreadAnswer = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string; code?: string }

/** Runs on this thread's connection (`:memory:`, or when asked for). */
export function inlineRunner<T>(target: T): SqliteRunner<T> {
  return {
    run: async (name, args) => (target[name] as (...a: unknown[]) => never)(...(args as unknown[])),
    room: async () => undefined,
    close: async () => undefined
  }
}

/** A failed operation, as a store thread reported it: SQLite's own message and code. */
export class SqliteThreadError extends Error {
  constructor(
    message: string,
    readonly code?: string
  ) {
    super(message)
    this.name = 'SqliteThreadError'
  }
}

/**
 * A thread with a connection of its own to the store's file (WAL: readers never wait for the writer, nor
 * it for them), doing what it is sent in order. Writes run in one (a cold layer's indexing, a deletion or a
 * prune's slice, which the event loop no longer waits for); reads in others
 * (a recall in a session at its cap scores thousands of entries). The thread keeps the process alive only
 * while operations are pending.
 */
export class StoreThread<T> implements SqliteRunner<T> {
  private readonly worker: Worker
  private readonly pending = new Map<number, { resolve: (value: never) => void; reject: (err: Error) => void }>()
  private next = 0
  private readonly waitingForRoom: (() => void)[] = []
  private stopped: Error | undefined
  private readonly exited: Promise<void>

  constructor(
    role: 'write' | 'read',
    path: string,
    caps: { maxSessionMemory?: number | undefined; maxSessionBytes?: number | undefined; keys?: KeyMaterial | undefined } = {}
  ) {
    this.worker = startThread(import.meta.url, 'sqlite-thread', { workerData: { role, path, ...caps } })
    this.worker.unref()
    this.worker.on('message', (answer: ThreadAnswer) => this.answer(answer))
    this.worker.on('error', (err) => this.stop(new Error(`the SQLite ${role === 'write' ? 'writer' : 'reader'} thread failed: ${err.message}`)))
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()))
    void this.exited.then(() => this.stop(new Error(`the SQLite ${role === 'write' ? 'writer' : 'reader'} thread has stopped`)))
  }

  /** Operations asked for and not yet answered. */
  get backlog(): number {
    return this.pending.size
  }

  run<K extends Method<T>>(name: K, args: Args<T, K>): Promise<Result<T, K>> {
    if (this.stopped) return Promise.reject(this.stopped)
    const id = this.next++
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref()
      this.pending.set(id, { resolve: resolve as (value: never) => void, reject })
      this.worker.postMessage({ id, name: String(name), args: args as unknown[] } satisfies ThreadRequest)
    })
  }

  private answer(answer: ThreadAnswer): void {
    const waiting = this.pending.get(answer.id)
    if (!waiting) return
    this.pending.delete(answer.id)
    if (this.pending.size === 0) this.worker.unref()
    // one operation done, one caller let on (its write is asked for later, once its answer has gone)
    if (this.pending.size < MAX_WRITE_BACKLOG) this.waitingForRoom.shift()?.()
    if (answer.ok) waiting.resolve(answer.value as never)
    else waiting.reject(new SqliteThreadError(answer.message, answer.code))
  }

  room(): Promise<void> {
    if (this.stopped || this.pending.size < MAX_WRITE_BACKLOG) return Promise.resolve()
    return new Promise((resolve) => this.waitingForRoom.push(resolve))
  }

  /** Every operation still waiting fails with `err`, and so does every later one; no one waits for room. */
  private stop(err: Error): void {
    this.stopped ??= err
    // (after close, every operation asked for before it has been answered by now)
    for (const { reject } of this.pending.values()) reject(err)
    this.pending.clear()
    for (const resolve of this.waitingForRoom.splice(0)) resolve()
  }

  async close(): Promise<void> {
    if (this.stopped) return
    this.stopped = new Error('the SQLite thread has stopped')
    // Asked last, answered last: the thread closes its connection after everything before it.
    this.worker.ref()
    this.worker.postMessage({ id: -1, name: 'close', args: [] })
    await this.exited
  }
}

/** Reads spread over a few threads, each read given to the one with the fewest waiting: a slow recall holds up one thread, not every read. */
export class ReaderPool implements SqliteRunner<Reads> {
  /** Started as reads need them: the first at the first read (a store only written to, as in a compaction's worker, starts none). */
  private threads: StoreThread<Reads>[] = []
  private closed = false

  constructor(
    private readonly path: string,
    private readonly size: number,
    private readonly keys: KeyMaterial = {}
  ) {}

  run<K extends Method<Reads>>(name: K, args: Args<Reads, K>): Promise<Result<Reads, K>> {
    if (this.closed) return Promise.reject(new Error('the SQLite reader thread has stopped'))
    let idlest = this.threads[0]
    for (const t of this.threads) if (t.backlog < (idlest as StoreThread<Reads>).backlog) idlest = t
    // one more thread only when every one started is busy: a store read now and then keeps one
    if (!idlest || (idlest.backlog > 0 && this.threads.length < this.size)) {
      idlest = new StoreThread<Reads>('read', this.path, { keys: this.keys })
      this.threads.push(idlest)
    }
    return idlest.run(name, args)
  }

  async room(): Promise<void> {
    return undefined
  }

  async close(): Promise<void> {
    this.closed = true
    await Promise.all(this.threads.map((t) => t.close()))
  }
}
