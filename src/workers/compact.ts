import type { ErrorKind } from '../contract/errors.js'
/**
 * A compaction off the event loop: a worker-pool task that gets the request body's raw bytes
 * (transferred, not copied) and does everything that costs CPU there: parse, the nesting and
 * prototype check, schema validation, the history's rules, the plan, the extractive summary, the cold
 * layer's entries and the response's serialization. The main thread only routes and answers.
 */
import { readCompactRequest, readJson } from '../contract/validation.js'
import { InvalidHistoryError, SummarizerUnavailableError } from '../service/errors.js'
import {
  type CompactDefaults,
  type CompactDeps,
  type CompactResponseBody,
  type CompactionInput,
  type ResponseView,
  type RunContext,
  clearedMemory,
  compactionInput,
  runCompaction
} from '../service/compact.js'
import type { BytesResult, ProxiedResult } from '../service/compactions.js'
import type { ClearedUse } from '../compaction/index.js'
import type { MemoryEntry } from '../memory/entries.js'
import { ConversationsText } from '../service/conversations.js'
import { ExtractiveSummarizer } from '../summarizer/extractive.js'
import { randomUUID } from 'node:crypto'
import { Piscina } from 'piscina'
import { jsonBytes } from '../contract/wire.js'
import type { MessagePort } from 'node:worker_threads'
import type { SummarizerKind } from '../summarizer/summarizer.js'
import { PortSummarizer } from './summary-port.js'

export interface CompactTask {
  body: Uint8Array
  defaults: CompactDefaults
  keyName: string
  coldLayer: boolean
  /** The name of the app's shared table of conversations' text (ConversationsText.shared). */
  conversations?: string
  /**
   * A proxy's compaction (a crossing, the Responses compaction answered here): the body is the gateway's
   * own, made from a history it has read and checked already, compacted with these of its run's settings
   * (a crossing's `recallTool`, `clipToBudget`), and answered as a ProxiedResult rather than as bytes for a client.
   */
  proxied?: Pick<RunContext, 'recallTool' | 'clipToBudget'>
  /** Where a model writes the summary: the port the main thread answers summary asks on, and the model's kind (summary-port.ts). */
  summary?: { port: MessagePort; kind: SummarizerKind }
  /** Not a compaction: tool results the proxy cleared, their whole outputs redacted here for the cold layer (the body is empty). */
  cleared?: ClearedUse[]
}

const extractive = new ExtractiveSummarizer()
/** What the app's conversations sent, by the name its threads share it under (one app's pool per worker: one entry). */
const tables = new Map<string, ConversationsText>()
function conversationsOf(name: string | undefined): ConversationsText {
  const key = name ?? ''
  let table = tables.get(key)
  if (!table) {
    table = new ConversationsText(undefined, undefined, name)
    tables.set(key, table)
  }
  return table
}

/** What a compaction here runs with: the task's defaults, the extractive summarizer, the model through the task's port, the app's shared table. */
function workerDeps(task: CompactTask, model?: PortSummarizer): CompactDeps {
  return {
    ...(model ? { modelSummarizer: model } : {}),
    defaults: task.defaults,
    extractive,
    newId: () => `cmp_${randomUUID().replace(/-/g, '')}`,
    now: () => performance.now(),
    coldLayer: task.coldLayer,
    conversations: conversationsOf(task.conversations)
  }
}

function refused(kind: ErrorKind, message: string, path?: string): BytesResult {
  return { ok: false, kind, message, ...(path !== undefined ? { path } : {}) }
}

/** The task's model, where it has one: asked over its port, which is closed with the task. */
async function withModel<T>(task: CompactTask, work: (model: PortSummarizer | undefined) => Promise<T>): Promise<T> {
  const model = task.summary ? new PortSummarizer(task.summary.port, task.summary.kind) : undefined
  try {
    return await work(model)
  } finally {
    model?.close()
  }
}

export async function compactTask(task: CompactTask, model?: PortSummarizer): Promise<BytesResult> {
  const read = readCompactRequest(task.body)
  if (!read.ok) return refused(read.kind, read.message, read.path)
  const input = compactionInput(read.body)
  try {
    const run = await runCompaction(input, workerDeps(task, model), { keyName: task.keyName })
    const json = jsonBytes(run.response)
    // the messages go back serialized only; the rest is what the main thread counts, records and logs
    return {
      ok: true,
      json,
      run: { ...run, response: withoutMessages(run.response) },
      as: { mode: input.mode, sessionId: input.sessionId, budgetTokens: input.budgetTokens, format: input.format }
    }
  } catch (err) {
    if (err instanceof InvalidHistoryError) return refused(err.kind, err.problem.message, err.problem.path)
    if (err instanceof SummarizerUnavailableError) return refused(err.kind, err.message, '/summarizer')
    throw err
  }
}

/** The answer without its messages (they go back serialized, or as indexes of a proxy's own). */
function withoutMessages(response: CompactResponseBody): ResponseView {
  return response.compacted ? (({ messages: _messages, ...rest }) => rest)(response) : response
}

/** A proxy's compaction, run here as it would run on the main thread. */
export async function proxiedTask(task: CompactTask, proxied: NonNullable<CompactTask['proxied']>, model?: PortSummarizer): Promise<ProxiedResult> {
  const read = readJson(task.body)
  if (!read.ok) throw new Error(`a proxied compaction's body did not read back: ${read.message}`)
  const body = read.value as CompactionInput
  try {
    const run = await runCompaction(body, workerDeps(task, model), { keyName: task.keyName, ...proxied })
    const index = new Map<object, number>(body.messages.map((m, i) => [m, i]))
    const messages = run.response.compacted ? run.response.messages.map((m) => index.get(m) ?? m) : undefined
    return { ok: true, run: { ...run, response: withoutMessages(run.response) }, ...(messages ? { messages } : {}) }
  } catch (err) {
    if (err instanceof InvalidHistoryError) return { ok: false, problem: err.problem }
    throw err
  }
}

/** The pool's entry: the task, with the response's bytes moved to the main thread rather than copied. */
export default async function moveResult(task: CompactTask): Promise<BytesResult | ProxiedResult | MemoryEntry[]> {
  if (task.cleared) return clearedMemory(task.cleared)
  const { proxied } = task
  if (proxied) return withModel(task, (model) => proxiedTask(task, proxied, model))
  const result = await withModel(task, (model) => compactTask(task, model))
  if (!result.ok) return result
  const moved = { [Piscina.transferableSymbol]: [result.json.buffer], [Piscina.valueSymbol]: result }
  return Piscina.move(moved as unknown as Parameters<typeof Piscina.move>[0]) as unknown as BytesResult
}
