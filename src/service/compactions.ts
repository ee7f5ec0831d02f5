/**
 * A compaction served, wherever it is asked for (the compact route; a proxy's crossing, a compaction on demand,
 * a summary written ahead): run where it runs (a large one in a worker, else here), then served (served.ts:
 * counted, logged, tallied, its record written or scheduled). The one place that decides where and how; the
 * HTTP layer reads a body, calls this, and answers.
 */
import type { ClearedUse, HistoryProblem, Message } from '../compaction/index.js'
import { at } from '../compaction/index.js'
import { type ErrorKind, GatewayError } from '../contract/errors.js'
import { jsonBytes } from '../contract/wire.js'
import type { MemoryEntry } from '../memory/entries.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import {
  type CompactDeps,
  type CompactResponseBody,
  type CompactRun,
  type ResponseView,
  type CompactionInput,
  type RunContext,
  clearedMemory,
  runCompaction
} from './compact.js'
import { InvalidHistoryError } from './errors.js'
import { type Scheduled, type ServedAt, type Serving, serveCompaction } from './served.js'

/** What a compaction said of itself: what it is counted, recorded and logged under. */
export type CompactedAs = Pick<CompactionInput, 'mode' | 'sessionId' | 'budgetTokens' | 'format'>

/**
 * A /v1/compact body compacted in a worker: the answer's UTF-8 bytes (made there and moved, not copied: the
 * main thread writes them to the socket as they are) and what the main thread counts, records and logs; or
 * the body's refusal, in the words and at the place a client is answered with.
 */
export type BytesResult =
  { ok: true; json: Uint8Array; run: CompactRun<ResponseView>; as: CompactedAs } | { ok: false; kind: ErrorKind; message: string; path?: string }

/**
 * A proxy's compaction run in a worker: what the main thread counts, records and logs (the run without the
 * response's messages), and the messages, each given as the index of the input's own message where it came
 * back unchanged (the main thread has that object, and the bytes the client sent it as, which are forwarded as
 * they came), else whole (a summary turn, a clipped message).
 */
export type ProxiedResult = { ok: true; run: CompactRun<ResponseView>; messages?: (number | Message)[] } | { ok: false; problem: HistoryProblem }

/** The app's compaction workers (workers/pool.ts), as this service uses them; a summary a model writes is asked of `model` on this thread. */
export interface CompactionWorkers {
  /** A /v1/compact body, as its bytes: read, checked and compacted in a worker. */
  compact(bytes: Buffer, keyName: string, model: Summarizer | undefined, signal: AbortSignal | undefined): Promise<BytesResult>
  /** A proxy's compaction, its input as bytes, run with these of its settings. */
  proxied(bytes: Uint8Array, context: RunContext, model: Summarizer | undefined): Promise<ProxiedResult>
  /** The cold layer's entries of tool results the proxy cleared, their whole outputs redacted. */
  cleared(uses: ClearedUse[]): Promise<MemoryEntry[]>
}

/** A /v1/compact request: its body read here (an input), or left as its bytes for a worker. */
export type CompactAsk = { input: CompactionInput } | { bytes: Buffer }

/** Who asked for a compaction of the compact route, and when. */
export interface RouteAt {
  keyName: string
  log: ServedAt['log']
  /** When the request began (performance.now()). */
  started: number
  /** Aborted when the client hangs up. */
  signal: AbortSignal
}

/** A compaction of the compact route, run and served: the answer's bytes, its run, what it said of itself, and its record's schedule. */
export interface RouteCompaction {
  json: Uint8Array
  run: CompactRun<ResponseView>
  as: CompactedAs
  scheduled: Scheduled
}

export interface CompactionsOptions {
  deps: CompactDeps
  /** None where COMPACT_WORKERS=0: every compaction runs here. */
  workers: CompactionWorkers | undefined
  /** Bodies of this many bytes or more go to the workers (COMPACT_WORKER_MIN_KB; lower with a model). */
  workerMinBytes: number
  /** A compaction no model writes (a crossing's merge) goes to a worker from this many bytes: the client waits for it. */
  mergeMinBytes: number
  serving: Serving
}

/** A proxied compaction's run as it would have been made here: each message the worker gave back by its index is the input's own object. */
function withMessagesBack(result: Extract<ProxiedResult, { ok: true }>, sent: readonly unknown[]): CompactRun {
  const { run, messages } = result
  if (!messages) return run as CompactRun
  return { ...run, response: { ...run.response, messages: messages.map((m) => (typeof m === 'number' ? at(sent, m) : m)) } as CompactResponseBody }
}

export class Compactions {
  constructor(private readonly options: CompactionsOptions) {}

  /** Whether a /v1/compact body of this many bytes is left as bytes, to be read in a worker. */
  readsInWorker(bytes: number): boolean {
    return this.options.workers !== undefined && bytes >= this.options.workerMinBytes
  }

  /** A /v1/compact request: run where it runs, then served as the route's. A worker's refusal is thrown as the client is answered. */
  async compact(ask: CompactAsk, who: RouteAt): Promise<RouteCompaction> {
    const done = 'bytes' in ask ? await this.inWorker(ask.bytes, who) : await this.here(ask.input, who)
    const { as, run } = done
    const scheduled = await this.serve(run, {
      via: 'route',
      keyName: who.keyName,
      session: as.sessionId,
      mode: as.mode ?? 'auto',
      budgetTokens: as.budgetTokens ?? this.options.deps.defaults.budgetTokens,
      log: who.log,
      started: who.started
    })
    return { ...done, scheduled }
  }

  private async inWorker(bytes: Buffer, who: RouteAt): Promise<Omit<RouteCompaction, 'scheduled'>> {
    const { workers, deps } = this.options
    if (!workers) throw new Error('no workers to compact in')
    const result = await workers.compact(bytes, who.keyName, deps.modelSummarizer, who.signal)
    if (!result.ok) throw new GatewayError(result.kind, result.message, result.path !== undefined ? { path: result.path } : {})
    return result
  }

  private async here(input: CompactionInput, who: RouteAt): Promise<Omit<RouteCompaction, 'scheduled'>> {
    const run = await runCompaction(input, this.options.deps, { keyName: who.keyName, signal: who.signal })
    const { mode, sessionId, budgetTokens, format } = input
    return { json: jsonBytes(run.response), run, as: { mode, sessionId, budgetTokens, format } }
  }

  /**
   * A proxy's compaction (a crossing's, one asked for, a summary written ahead): in a worker where its input is
   * large enough, else here; the same run either way. Its summary is `model`'s (the conversation's own) where
   * given, else the gateway's model's.
   */
  async run(input: CompactionInput, context: RunContext, model?: Summarizer): Promise<CompactRun> {
    const { workers, deps, workerMinBytes, mergeMinBytes } = this.options
    const here = model ? { ...deps, modelSummarizer: model } : deps
    if (!workers) return runCompaction(input, here, context)
    // the input as bytes: the client's messages as the bytes they came as, the rest written once
    const bytes = jsonBytes(input)
    if (bytes.length < (input.summarizer === 'extractive' ? mergeMinBytes : workerMinBytes)) return runCompaction(input, here, context)
    const result = await workers.proxied(bytes, context, model ?? deps.modelSummarizer)
    if (!result.ok) throw new InvalidHistoryError(result.problem)
    return withMessagesBack(result, input.messages)
  }

  /** A compaction served, wherever it ran: counted, logged, tallied, its record written or scheduled (served.ts). */
  serve(run: CompactRun<ResponseView>, where: ServedAt): Promise<Scheduled> {
    return serveCompaction(this.options.serving, run, where)
  }

  /** The cold layer's entries of tool results the proxy cleared, their whole outputs redacted: in a worker where they are as large as a body sent to one. */
  clearedMemory(uses: ClearedUse[]): Promise<MemoryEntry[]> {
    const { workers, workerMinBytes } = this.options
    const bytes = uses.reduce((n, u) => n + u.evidence.length, 0)
    return workers && bytes >= workerMinBytes ? workers.cleared(uses) : Promise.resolve(clearedMemory(uses))
  }
}
