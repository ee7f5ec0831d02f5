/**
 * A model's summary for a compaction that runs in a worker: the worker plans the compaction, renders and
 * redacts the span (the work that costs CPU, off the event loop), and asks the main thread, over a port of
 * the task's, for the summary; the main thread calls the model through the app's summarizer stack (its
 * limiter, its cache shared by the replicas, its timeout and fallback) with the plan as data, the span
 * rendered already, and answers. The worker then finishes the compaction (the summary's redaction, the cold
 * layer, the answer's bytes) there.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads'
import type { CompactionPlan } from '../compaction/index.js'
import { renderedSpan } from '../compaction/index.js'
import { compactionRedactors } from '../secrets/index.js'
import type { SummarizeRequest, SummarizeResult, Summarizer, SummarizerKind } from '../summarizer/summarizer.js'

/** What the worker asks: the plan without its span (rendered already), and what the summarizer is told. */
interface SummaryAsk {
  id: number
  plan: CompactionPlan
  known: [string, string][]
  instructions?: string
  keyName?: string
  session?: string
}

type SummaryAnswer = { id: number; ok: true; result: SummarizeResult } | { id: number; ok: false; message: string }

/** The main thread's side: the port to give the task, the errors its summaries threw (the first is the compaction's), and its closing. */
export interface SummaryPort {
  port: MessagePort
  /** The summarizer's own errors (an overload, say), as thrown: the caller throws the first in place of the worker's report of it. */
  errors: unknown[]
  close(): void
}

/** Answers a worker's summary asks with `model`, aborted with `signal` (the client's hang-up). */
export function summaryPort(model: Summarizer, signal?: AbortSignal): SummaryPort {
  const { port1, port2 } = new MessageChannel()
  const errors: unknown[] = []
  port1.on('message', (ask: SummaryAsk) => {
    const request: SummarizeRequest = {
      plan: ask.plan,
      redactors: compactionRedactors(ask.known),
      ...(ask.instructions !== undefined ? { instructions: ask.instructions } : {}),
      ...(ask.keyName !== undefined ? { keyName: ask.keyName } : {}),
      ...(ask.session !== undefined ? { session: ask.session } : {}),
      ...(signal ? { signal } : {})
    }
    model.summarize(request).then(
      (result) => port1.postMessage({ id: ask.id, ok: true, result } satisfies SummaryAnswer),
      (err: unknown) => {
        errors.push(err)
        port1.postMessage({ id: ask.id, ok: false, message: err instanceof Error ? err.message : String(err) } satisfies SummaryAnswer)
      }
    )
  })
  return { port: port2, errors, close: () => port1.close() }
}

/** The summary's fault on the main thread, as the worker knows it (the main thread throws the fault itself). */
export class RemoteSummaryError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RemoteSummaryError'
  }
}

/** The worker's side: a summarizer that renders the span here and asks the main thread for the summary. */
export class PortSummarizer implements Summarizer {
  private next = 0
  private readonly waiting = new Map<number, { resolve: (r: SummarizeResult) => void; reject: (e: Error) => void }>()

  constructor(
    private readonly port: MessagePort,
    readonly kind: SummarizerKind
  ) {
    port.on('message', (answer: SummaryAnswer) => {
      const waiter = this.waiting.get(answer.id)
      if (!waiter) return
      this.waiting.delete(answer.id)
      if (answer.ok) waiter.resolve(answer.result)
      else waiter.reject(new RemoteSummaryError(answer.message))
    })
  }

  summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const rendered = renderedSpan(request.plan, request.redactors)
    // the span stays here: the model reads its rendering, which is all the plan sends of it
    const plan: CompactionPlan = { ...request.plan, span: [], rendered }
    delete plan.reclip
    const id = this.next++
    const ask: SummaryAsk = {
      id,
      plan,
      known: request.redactors.known?.() ?? [],
      ...(request.instructions !== undefined ? { instructions: request.instructions } : {}),
      ...(request.keyName !== undefined ? { keyName: request.keyName } : {}),
      ...(request.session !== undefined ? { session: request.session } : {})
    }
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject })
      this.port.postMessage(ask)
    })
  }

  /** Stops listening (the task is done): the worker's loop is not held by the port. */
  close(): void {
    this.port.close()
  }
}
