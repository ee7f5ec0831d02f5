/**
 * One proxied API as the proxy sees it (its dialect): how its body is read and written back, what its
 * answers bill, and which of its provider's own features it carries. Each API's is a module of
 * proxy/dialects; the service runs a request through it (service/proxy/requests.ts), the route adds where it goes.
 */
import type { Message } from '../compaction/index.js'
import type { Summarizer } from '../summarizer/summarizer.js'
import type { ForwardedTail } from './anchors.js'
import type { ProxiedBody } from './body.js'
import type { ClientSummaries } from './client-summaries.js'
import type { ClearedHistory } from './openai.js'
import type { RecallFormat, StoredExchange } from './recall-tool.js'
import type { ProxyParts } from './request.js'
import type { UsageFormat } from './usage.js'

/** What a compaction gives the dialect to write: the messages to send, and where the client's own begin in them. */
export type Forwarding = { messages: Message[] } & ForwardedTail

/** What an API's body gave the proxy: the parts its compactor reads, or nothing (forwarded unread), with why when it matters. */
export type ProxyRead<R> = { parts: ProxyParts; read: R } | { unread: string | undefined }

/** One proxied API as the service sees it: how its body is read and written back, and what it may ask for. */
export interface ProxiedDialect<R> {
  /** The metrics' and log's name of the endpoint. */
  endpoint: string
  /** The API's name, in errors ("the Messages API"). */
  name: string
  /** Reads the body, which is not far under the budget (or has none). */
  read(body: ProxiedBody, budgetMayPass: () => boolean): ProxyRead<R>
  /**
   * The body to forward when the history was compacted or an earlier summary stands in for its start
   * (`outcome`), or its old tool results were cleared (`cleared`: the core's messages with them, and where
   * each is), or both.
   */
  write(body: ProxiedBody, read: R, outcome: Forwarding | undefined, cleared?: ClearedHistory, offerRecall?: boolean): Buffer
  /** Whether a result the core reads at (message, block) cannot take a placeholder in the client's body (clearing leaves it). */
  fixed?: (read: R, message: number, block: number) => boolean
  /** Where, in the client's body, a problem the core found at one of its messages is (its path). */
  place?(read: R, path: string): string
  /**
   * Where the conversation's own model may write its summaries (the generation endpoints): the
   * summarizer of this request, from its body, the headers it is forwarded with, a promise settled once
   * the upstream has begun to answer, and the bytes it was forwarded as (set by then).
   */
  clientSummarizer?: (
    settings: ClientSummaries,
    body: ProxiedBody,
    read: R,
    headers: Record<string, string>,
    after: Promise<unknown>,
    forwarded: () => Buffer | undefined
  ) => ((messages: Message[]) => Summarizer) | undefined
  /** Whose usage its answers carry (the Messages API's, Chat Completions', the Responses API's, Gemini's): read from each answer into the session's cost; none where its answers bill nothing (a token count). */
  usage?: UsageFormat
  /** Whether its requests may carry the Messages API's `context_management` edits, which the gateway performs (context-management.ts). */
  contextManagement?: true
  /** Whether its requests may carry the Responses API's compaction (`context_management`, the gateway's own compaction items: responses-compaction.ts). */
  responsesCompaction?: true
  /** The dialect offers the gateway's recall tool and answers the model's calls of it, in this API's format (server/proxy/recall-relay.ts). */
  recallTool?: RecallFormat
  /**
   * Where the client's items map to the core's turns through the read (Chat Completions): the body with the
   * exchanges put back in its own items, to be read again; and where the client's answer will stand.
   */
  restoreItems?: (body: ProxiedBody, read: R, exchanges: readonly StoredExchange[]) => ProxiedBody | undefined
  answerAt?: (read: R) => number
  /** Tools the client declares elsewhere than in `tools` (Codex's `additional_tools` input items), for the recall tool's name. */
  declaredTools?: (read: R) => readonly unknown[]
}
