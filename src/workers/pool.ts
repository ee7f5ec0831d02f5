import { Piscina } from 'piscina'
import { threadModule } from '../threads/entry.js'
import type { CompactTask } from './compact.js'
import type { BytesResult, ProxiedResult } from '../service/compactions.js'
import type { ClearedUse } from '../compaction/index.js'
import type { MemoryEntry } from '../memory/entries.js'

/** Tasks a worker takes at once: those waiting on a model's summary leave it free for the others. */
const TASKS_PER_WORKER = 16

/**
 * The pool of compaction workers, sized to the cores. Threads start at `warm()` (the server, at boot)
 * and stay up, or on first use (a test app that never gets a large body starts none); bodies are
 * transferred to them, not copied.
 */
export class CompactionPool {
  private pool: Piscina | undefined
  /** Set by warm(): the threads then stay up (a server), instead of ending when idle (a test app). */
  private keepWarm = false

  constructor(readonly threads: number) {}

  private get piscina(): Piscina {
    if (!this.pool) {
      // the worker's code as every thread finds it (threads/entry.ts); from the sources, with tsx's loader
      const { url, fromSource } = threadModule(import.meta.url, 'compact')
      this.pool = new Piscina({
        filename: url.href,
        minThreads: this.keepWarm ? this.threads : 0,
        maxThreads: this.threads,
        idleTimeout: 60_000,
        // a compaction whose summary a model writes waits for it in its worker (seconds): others run beside it
        concurrentTasksPerWorker: TASKS_PER_WORKER,
        ...(fromSource ? { execArgv: ['--import', 'tsx'] } : {})
      })
    }
    return this.pool
  }

  run(task: Omit<CompactTask, 'body'>, body: Buffer): Promise<BytesResult> {
    // A body that owns its whole memory moves to the worker as it is; one that shares a pool is copied once.
    const own = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? new Uint8Array(body.buffer) : new Uint8Array(body)
    // (the summary's port, where a model writes it, moves with it)
    const transferList = [own.buffer as ArrayBuffer, ...(task.summary ? [task.summary.port] : [])]
    return this.piscina.run({ ...task, body: own } satisfies CompactTask, { transferList }) as Promise<BytesResult>
  }

  /** A proxy's compaction (CompactTask.proxied), its body the gateway's own bytes, moved to the worker as run() moves a body. */
  runProxied(task: Omit<CompactTask, 'body'> & Required<Pick<CompactTask, 'proxied'>>, body: Uint8Array): Promise<ProxiedResult> {
    return this.run(task, Buffer.from(body.buffer, body.byteOffset, body.byteLength)) as unknown as Promise<ProxiedResult>
  }

  /** The cold layer's entries of tool results the proxy cleared: their whole outputs redacted in a worker. */
  clearedMemory(uses: ClearedUse[]): Promise<MemoryEntry[]> {
    const task: CompactTask = { body: new Uint8Array(0), defaults: { budgetTokens: 'off', keepTurns: 0 }, keyName: '', coldLayer: true, cleared: uses }
    return this.piscina.run(task) as Promise<MemoryEntry[]>
  }

  /** Starts every thread and runs a small compaction in each, so that the first requests find them warm. */
  async warm(task: Omit<CompactTask, 'body'>, body: Buffer): Promise<void> {
    this.keepWarm = true
    await Promise.all(Array.from({ length: this.threads }, () => this.run(task, Buffer.from(body))))
  }

  async close(): Promise<void> {
    await this.pool?.destroy()
  }
}
