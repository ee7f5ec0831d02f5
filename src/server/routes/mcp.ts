import type { FastifyPluginAsync, FastifyReply } from 'fastify'
import { Type } from 'typebox'
import { MCP_RECALL_TOOL, MCP_SERVER_NAME } from '../../compaction/index.js'
import { RECALL_TOOL_HITS, RECALL_TOOL_MAX_HITS, answerRecall, recallLimit } from '../../service/recall.js'
import { KEYED, keyedResponses } from './security.js'
import { errorBody } from '../errors.js'

/**
 * POST /mcp: an MCP server (streamable HTTP, answered as JSON: the gateway never opens a stream of its own)
 * offering one tool, `recall`, a search of what compaction removed from a session. Behind the gateway's keys
 * like every route, and without OAuth's discovery (no protected-resource metadata, no `WWW-Authenticate`
 * that would send a client looking for an authorization server instead of sending its configured header).
 */

/** The protocol versions the server speaks, newest first: a client's own is answered where it is one of them. */
export const MCP_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const

const JSONRPC = '2.0'

/** The MCP tool: what it searches, and the session it searches given by the handle the summary note and the placeholders carry. */
export const MCP_TOOL = {
  name: MCP_RECALL_TOOL,
  title: 'Recall compacted turns',
  description:
    "Search what the compaction gateway removed from a conversation (compacted or cleared): older requests, answers, whole tool outputs (a log's lines, a file's contents), commands and their outcomes, errors. Give the session the conversation's summary note or a cleared output's placeholder names, and a few distinctive words of what you need. Returns the best matching passages, exact, each with the messages and lines it came from.",
  inputSchema: {
    type: 'object',
    properties: {
      session: { type: 'string', description: 'The session to search: the one the summary note or a placeholder names.' },
      query: { type: 'string', description: 'A few distinctive words of what to find: an error message, a file name, a value, a tool call id.' },
      limit: { type: 'integer', minimum: 1, maximum: RECALL_TOOL_MAX_HITS, description: `How many passages (default ${RECALL_TOOL_HITS}).` }
    },
    required: ['session', 'query']
  },
  annotations: { readOnlyHint: true, openWorldHint: false }
} as const

interface RpcMessage {
  jsonrpc?: unknown
  id?: unknown
  method?: unknown
  params?: unknown
}

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string
  ) {
    super(message)
  }
}

const isId = (id: unknown): id is string | number => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))

export const mcpRoutes: FastifyPluginAsync<{ version: string }> = async (app, { version }) => {
  const { store } = app

  /** One request's result, or an RpcError. */
  async function result(method: string, params: Record<string, unknown>, keyName: string): Promise<unknown> {
    switch (method) {
      case 'initialize': {
        const asked = params.protocolVersion
        const protocolVersion = MCP_PROTOCOL_VERSIONS.find((v) => v === asked) ?? MCP_PROTOCOL_VERSIONS[0]
        return {
          protocolVersion,
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: MCP_SERVER_NAME, title: 'Compaction gateway', version },
          instructions: `When a conversation's summary note or a cleared output's placeholder names a session, the ${MCP_RECALL_TOOL} tool gets the exact text of what was removed back.`
        }
      }
      case 'ping':
        return {}
      case 'tools/list':
        return { tools: [MCP_TOOL] }
      case 'tools/call': {
        if (params.name !== MCP_RECALL_TOOL) throw new RpcError(-32602, `no tool "${String(params.name)}": this server has "${MCP_RECALL_TOOL}" only`)
        const args = (params.arguments ?? {}) as Record<string, unknown>
        const session = typeof args.session === 'string' ? args.session.trim() : ''
        const query = typeof args.query === 'string' ? args.query.trim() : ''
        if (session === '' || query === '')
          return toolError(`${session === '' ? 'session' : 'query'} is missing: give the session the summary note names and a few words to search for`)
        try {
          return { content: [{ type: 'text', text: await answerRecall(store, keyName, session, query, recallLimit(args.limit)) }], isError: false }
        } catch {
          return toolError('the gateway could not read its store: try again in a moment')
        }
      }
      default:
        throw new RpcError(-32601, `no method "${method}"`)
    }
  }

  app.post(
    '/mcp',
    {
      schema: {
        tags: ['memory'],
        operationId: 'mcp',
        summary: 'An MCP server (streamable HTTP, JSON answers) offering the recall tool: a search of what compaction removed from a session',
        security: KEYED,
        body: Type.Unknown({ description: 'One JSON-RPC 2.0 message: a request, a notification or a response.' }),
        response: {
          200: Type.Object({}, { additionalProperties: true, description: 'The JSON-RPC response to the request.' }),
          202: Type.Null({ description: 'A notification or a response, accepted (no body).' }),
          ...keyedResponses()
        }
      }
    },
    async (request, reply) => {
      const message = request.body as RpcMessage | unknown[] | null
      if (Array.isArray(message) || message === null || typeof message !== 'object')
        return rpcError(reply, null, -32600, 'one JSON-RPC message an HTTP request (a batch is not taken)')
      const { id, method } = message
      // a notification or a client's response: nothing to answer
      if (typeof method !== 'string' || id === undefined) return reply.code(202).send()
      if (!isId(id)) return rpcError(reply, null, -32600, 'id must be a string or a number')
      if (message.jsonrpc !== JSONRPC) return rpcError(reply, id, -32600, 'jsonrpc must be "2.0"')
      const params = message.params === undefined ? {} : message.params
      if (params === null || typeof params !== 'object' || Array.isArray(params)) return rpcError(reply, id, -32602, 'params must be an object')
      try {
        const value = await result(method, params as Record<string, unknown>, request.keyName)
        return reply.code(200).type('application/json').send({ jsonrpc: JSONRPC, id, result: value })
      } catch (err) {
        if (err instanceof RpcError) return rpcError(reply, id, err.code, err.message)
        throw err
      }
    }
  )

  // no stream of the server's own, and no session to end: said as the transport says it
  const notAllowed = async (_request: unknown, reply: FastifyReply): Promise<FastifyReply> =>
    reply.code(405).header('allow', 'POST').type('application/json').send(errorBody('invalid_request_error', 'the MCP server answers POST only'))
  for (const [method, operationId] of [
    ['GET', 'mcpStream'],
    ['DELETE', 'mcpEnd']
  ] as const)
    app.route({
      method,
      url: '/mcp',
      schema: {
        tags: ['memory'],
        operationId,
        summary: 'Not offered: the MCP server opens no stream of its own and keeps no session to end (405)',
        security: KEYED,
        response: { 405: Type.Ref('ErrorResponse', { description: 'The MCP server answers POST only.' }), ...keyedResponses() }
      },
      handler: notAllowed
    })
}

function toolError(text: string): { content: { type: 'text'; text: string }[]; isError: true } {
  return { content: [{ type: 'text', text }], isError: true }
}

function rpcError(reply: FastifyReply, id: string | number | null, code: number, message: string): FastifyReply {
  return reply.code(200).type('application/json').send({ jsonrpc: JSONRPC, id, error: { code, message } })
}
