import type { FastifyPluginAsync } from 'fastify'
import { checkedWhenRead } from '../json.js'
import { MessagesBody } from '../../contract/proxy-bodies.js'
import { type ProxiedApi, installProxyHooks, proxyErrors, proxyHeaders, proxyRequest, upstreamAnswer } from '../proxy/forward.js'
import { KEYED } from './security.js'
import { messagesDialect } from '../../proxy/dialects/messages.js'

/** The proxied endpoints: the same path upstream as here. */
const ENDPOINTS = [
  {
    endpoint: 'messages',
    path: '/v1/messages',
    operationId: 'createMessage',
    summary: 'The Messages API, proxied: compacted past the budget, forwarded byte for byte under it, streamed back as it arrives',
    answer: 'The message'
  },
  {
    endpoint: 'count_tokens',
    path: '/v1/messages/count_tokens',
    operationId: 'countMessageTokens',
    summary: 'The Messages API token count, proxied: it counts what /v1/messages would send (compacted past the budget)',
    answer: 'The count'
  }
] as const

/**
 * POST /v1/messages and /v1/messages/count_tokens: the Messages API, proxied. A request over its budget
 * has its messages compacted (the pipeline, doctrine, summarizer, records and cold layer of /v1/compact);
 * one under it is forwarded byte for byte. The answer streams back as it arrives.
 */
export const messagesRoutes: FastifyPluginAsync = async (app) => {
  const options = app.proxy.policy.messages
  const { credentials } = options
  const { upstream } = app.proxy
  installProxyHooks(app, (url) => ENDPOINTS.find((e) => e.path === url)?.endpoint ?? 'messages')
  for (const route of ENDPOINTS) {
    const api: ProxiedApi<undefined> = {
      ...messagesDialect(route.endpoint),
      path: route.path,
      keySetting: 'ANTHROPIC_API_KEY',
      upstream,
      credentials
    }
    // The body stays bytes until the proxy reads it (one under its budget is forwarded unread); what it reads
    // is checked then, against this same schema (readMessagesRequest).
    app.post(
      route.path,
      {
        schema: {
          tags: ['proxy'],
          operationId: route.operationId,
          summary: route.summary,
          security: KEYED,
          headers: proxyHeaders('the session id the agent sends (x-claude-code-session-id, x-session-id, x-session-affinity), else metadata.user_id'),
          body: MessagesBody,
          response: {
            200: upstreamAnswer(
              `${route.answer}, as the Messages API gave it (status, headers and body; \`text/event-stream\` for \`stream: true\`), with \`x-compaction: none|compacted\`, \`x-compaction-summary-id\`, and \`x-compaction-recall-tool\` where the gateway added its recall tool to the request (its calls are answered by the gateway and never reach the client).`
            ),
            ...proxyErrors(
              'The body is not a Messages API request the gateway can estimate, or an over-budget history breaks the rules of a conversation; `error.path` names the place.',
              {
                name: 'The Messages API',
                failures: ' (500, 529 overloaded…)'
              }
            )
          }
        },
        validatorCompiler: checkedWhenRead
      },
      async (request, reply) => proxyRequest(app, options, api, request, reply)
    )
  }
}
