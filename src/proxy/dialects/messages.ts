/**
 * The Messages API's dialect: its body read as the core's messages (readMessagesRequest), written back with
 * the thinking setting the API accepts, its context management performed by the gateway, its usage billed,
 * the gateway's recall tool offered in its format, its summaries written by the conversation's own model.
 */
import { type Message, hasPrefixCheck, openLoopWithoutThinking } from '../../compaction/index.js'
import { withMessages } from '../../contract/wire.js'
import { clientSummarizer } from '../client-summaries.js'
import type { ProxiedDialect } from '../dialect.js'
import { withRecallToolBytes } from '../recall-tool.js'
import { readMessagesRequest } from '../request.js'

export function messagesDialect(endpoint: 'messages' | 'count_tokens'): ProxiedDialect<undefined> {
  return {
    endpoint,
    name: 'the Messages API',
    read: (body) => ({ parts: readMessagesRequest(body.value()), read: undefined }),
    ...(endpoint === 'messages'
      ? {
          clientSummarizer: (settings, body, _read, headers, after, forwarded) =>
            clientSummarizer(settings, body.value() as Record<string, unknown>, headers, after, forwarded),
          usage: 'messages' as const
        }
      : {}),
    contextManagement: true,
    recallTool: 'messages',
    // a compaction's messages are built on the cleared ones where both were done; the recall tool after the client's own
    write: (body, _read, outcome, cleared, offerRecall) => {
      const value = body.value() as Record<string, unknown>
      const messages = outcome?.messages ?? cleared?.messages ?? (value.messages as Message[])
      const bytes = withMessages(thinkingAsAccepted(value, messages), messages)
      return offerRecall ? withRecallToolBytes(bytes) : bytes
    }
  }
}

/**
 * The request's thinking setting as the API accepts it with the rewritten history: with thinking `enabled`,
 * the last assistant message of an open tool loop must begin with a thinking block; where the rewrite took
 * its stale thinking out, thinking is off for the request (the API's documented way), until the loop ends.
 */
function thinkingAsAccepted(body: Record<string, unknown>, messages: readonly Message[]): object {
  const thinking = body.thinking as { type?: unknown } | undefined
  if (thinking?.type !== 'enabled' || !hasPrefixCheck(body.model) || !openLoopWithoutThinking(messages)) return body
  return { ...body, thinking: { type: 'disabled' } }
}
