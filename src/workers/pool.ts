import { Piscina } from 'piscina'
import { threadModule } from '../threads/entry.js'
import type { CompactTask, CompactTaskResult, ProxiedResult } from './compact.js'

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
        ...(fromSource ? { execArgv: ['--import', 'tsx'] } : {})
      })
    }
    return this.pool
  }

  run(task: Omit<CompactTask, 'body'>, body: Buffer): Promise<CompactTaskResult> {
    // A body that owns its whole memory moves to the worker as it is; one that shares a pool is copied once.
    const own = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? new Uint8Array(body.buffer) : new Uint8Array(body)
    return this.piscina.run({ ...task, body: own } satisfies CompactTask, { transferList: [own.buffer as ArrayBuffer] }) as Promise<CompactTaskResult>
  }

  /** A proxy's compaction (CompactTask.proxied), its body the gateway's own bytes, moved to the worker as run() moves a body. */
  runProxied(task: Omit<CompactTask, 'body'> & Required<Pick<CompactTask, 'proxied'>>, body: Uint8Array): Promise<ProxiedResult> {
    return this.run(task, Buffer.from(body.buffer, body.byteOffset, body.byteLength)) as unknown as Promise<ProxiedResult>
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
