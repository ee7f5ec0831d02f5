import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import type { SqliteWrites } from './sqlite.js'
import { MAX_WRITE_BACKLOG } from '../contract/defaults.js'
export { MAX_WRITE_BACKLOG }

/** The writes a SQLite store makes, by name, with their arguments and results. */
type Writes = Pick<SqliteWrites, 'saveRecord' | 'putCached' | 'saveMemory' | 'deleteSession' | 'prune' | 'checkWritable'>
export type WriteName = keyof Writes

/** Where a store's writes run: in order, one at a time, each answered when it is committed. */
export interface SqliteWriter {
  run<K extends WriteName>(name: K, args: Parameters<Writes[K]>): Promise<ReturnType<Writes[K]>>
  /** Resolves when fewer than MAX_WRITE_BACKLOG writes wait: the caller may ask for more without the backlog growing. */
  room(): Promise<void>
  /** Resolves when every write asked for so far is done and the writer is closed. */
  close(): Promise<void>
}


/** A write asked of the writer thread, and its answer. */
export interface WriteRequest {
  id: number
  name: WriteName
  args: unknown[]
}
export type WriteAnswer = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string; code?: string }

/** Writes on this thread's connection (`:memory:`, or when asked for). */
export function inlineWriter(writes: SqliteWrites): SqliteWriter {
  return {
    run: async (name, args) => (writes[name] as (...a: unknown[]) => never)(...args),
    room: async () => undefined,
    close: async () => undefined
  }
}

/** A failed write, as the writer thread reported it: SQLite's own message and code. */
export class SqliteWriteError extends Error {
  constructor(
    message: string,
    readonly code?: string
  ) {
    super(message)
    this.name = 'SqliteWriteError'
  }
}

/**
 * Writes in a thread of their own, on a connection of their own (WAL: this thread's reads never wait for
 * them). A cold layer's full-text indexing takes 10-45 ms for a 100-400 KiB history, and a prune can
 * delete a day of them: with the writes here, the event loop answers in the meantime. Writes are done in
 * the order they are asked for; a caller that must read its own write awaits it first (as the server's
 * WritesAfterAnswers does). The thread keeps the process alive only while writes are pending.
 */
export class WriterThread implements SqliteWriter {
  private readonly worker: Worker
  private readonly pending = new Map<number, { resolve: (value: never) => void; reject: (err: Error) => void }>()
  private next = 0
  private readonly waitingForRoom: (() => void)[] = []
  private stopped: Error | undefined
  private readonly exited: Promise<void>

  constructor(path: string, maxSessionMemory?: number) {
    // Built, the thread's code is beside this file; run from the sources (tsx), it is the .ts file.
    const built = new URL('./sqlite-writer-thread.js', import.meta.url)
    const fromSource = !existsSync(fileURLToPath(built))
    // (From the sources, the thread registers tsx's loader itself, then imports its .ts code: a worker's
    // `--import tsx` is not applied to its modules on this Node.)
    const source = new URL('./sqlite-writer-thread.ts', import.meta.url).href
    const fromSourceCode = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(source)}) })`
    this.worker = fromSource ? new Worker(fromSourceCode, { eval: true, workerData: { path, maxSessionMemory } }) : new Worker(built, { workerData: { path, maxSessionMemory } })
    this.worker.unref()
    this.worker.on('message', (answer: WriteAnswer) => this.answer(answer))
    this.worker.on('error', (err) => this.stop(new Error(`the SQLite writer thread failed: ${err.message}`)))
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()))
    void this.exited.then(() => this.stop(new Error('the SQLite writer thread has stopped')))
  }

  run<K extends WriteName>(name: K, args: Parameters<Writes[K]>): Promise<ReturnType<Writes[K]>> {
    if (this.stopped) return Promise.reject(this.stopped)
    const id = this.next++
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref()
      this.pending.set(id, { resolve: resolve as (value: never) => void, reject })
      this.worker.postMessage({ id, name, args } satisfies WriteRequest)
    })
  }

  private answer(answer: WriteAnswer): void {
    const waiting = this.pending.get(answer.id)
    if (!waiting) return
    this.pending.delete(answer.id)
    if (this.pending.size === 0) this.worker.unref()
    // one write done, one caller let on (its write is asked for later, once its answer has gone)
    if (this.pending.size < MAX_WRITE_BACKLOG) this.waitingForRoom.shift()?.()
    if (answer.ok) waiting.resolve(answer.value as never)
    else waiting.reject(new SqliteWriteError(answer.message, answer.code))
  }

  room(): Promise<void> {
    if (this.stopped || this.pending.size < MAX_WRITE_BACKLOG) return Promise.resolve()
    return new Promise((resolve) => this.waitingForRoom.push(resolve))
  }

  /** Every write still waiting fails with `err`, and so does every later one; no one waits for room. */
  private stop(err: Error): void {
    this.stopped ??= err
    // (after close, every write asked for before it has been answered by now)
    for (const { reject } of this.pending.values()) reject(err)
    this.pending.clear()
    for (const resolve of this.waitingForRoom.splice(0)) resolve()
  }

  async close(): Promise<void> {
    if (this.stopped) return
    this.stopped = new Error('the SQLite writer thread has stopped')
    // Asked last, answered last: the thread closes its connection after every write before it.
    this.worker.ref()
    this.worker.postMessage({ id: -1, name: 'close', args: [] })
    await this.exited
  }
}
