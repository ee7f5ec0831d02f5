import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { type Static, Type } from 'typebox'
import { RECALL_TOOL_NAME } from '../../compaction/index.js'
import { MEMORY_KINDS } from '../../memory/entries.js'
import { SessionId } from '../../contract/schemas.js'
import { NotFoundError } from '../../contract/errors.js'
import { KEYED, keyedResponses } from './security.js'
import { DEFAULT_RECALL_LIMIT, MAX_RECALL_LIMIT } from '../../contract/defaults.js'

const SessionParams = Type.Object({ session_id: SessionId('The session.') })
const Kind = Type.Enum([...MEMORY_KINDS], {
  description:
    "ask: a user request; answer: assistant text; output: a tool's output, whole; call: a tool input's long text (a file written, an edit); command: a command and its outcome; error: why a call failed; evidence: failing tests, error lines with file:line, test tallies; file: a file read or modified."
})

export const RecallRequest = Type.Object(
  {
    query: Type.String({ minLength: 1, maxLength: 2_000, description: 'A few words of what to find: an error, a file, part of a request.' }),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RECALL_LIMIT, description: `At most this many results (default ${DEFAULT_RECALL_LIMIT}).` })),
    kinds: Type.Optional(Type.Array(Kind, { maxItems: MEMORY_KINDS.length, description: 'Only entries of these kinds.' }))
  },
  { additionalProperties: false }
)

const RecallResult = Type.Object(
  {
    kind: Kind,
    text: Type.String({ description: 'The entry as kept: the exact text (a passage of a long one), redacted.' }),
    compaction_id: Type.String({ description: 'The compaction that removed it.' }),
    messages: Type.Array(Type.Integer(), {
      minItems: 2,
      maxItems: 2,
      description: "[from, to]: indices of the messages it came from, in the history as that compaction's request sent it."
    }),
    lines: Type.Optional(
      Type.Array(Type.Integer({ minimum: 1 }), {
        minItems: 2,
        maxItems: 2,
        description: '[first, last]: the lines (1-based) of the text this entry is a passage of; absent for an entry of the digest.'
      })
    ),
    score: Type.Number({ description: "Relevance: BM25 over the session's own entries (higher is better)." }),
    created_at: Type.String({ format: 'date-time' })
  },
  { additionalProperties: false }
)

const RecallResponse = Type.Object({ results: Type.Array(RecallResult, { description: 'Best first.' }) }, { additionalProperties: false })

const RecapResponse = Type.Object(
  {
    session_id: Type.String(),
    summary: Type.Object({ id: Type.String(), text: Type.String(), sections: Type.Ref('SummarySections') }, { additionalProperties: false }),
    created_at: Type.String({ format: 'date-time' }),
    compactions: Type.Integer({ description: 'How many compactions the session has had.' })
  },
  { additionalProperties: false, description: "The session's current summary, to rebuild a context after a restart." }
)

/** The recall tool in the Messages API's tool format, for a client to add to its tools. */
export const RECALL_TOOL = {
  name: RECALL_TOOL_NAME,
  description:
    "Search what was compacted away or cleared from this session: older requests, assistant answers, whole tool outputs (a log's lines, a file's contents), commands and their outcomes, errors, failing tests, files. Use it when you need the exact text of something no longer in the conversation. Returns the best matching passages, exact, each citing the messages and lines it came from.",
  input_schema: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'A few distinctive words of what to find: an error message, a file name, part of a request.' },
      limit: { type: 'integer', minimum: 1, maximum: MAX_RECALL_LIMIT, description: `How many results (default ${DEFAULT_RECALL_LIMIT}).` },
      kinds: { type: 'array', items: { type: 'string', enum: [...MEMORY_KINDS] }, description: 'Only entries of these kinds.' }
    },
    required: ['query']
  }
}

const RecallTool = Type.Object(
  { name: Type.String(), description: Type.String(), input_schema: Type.Object({}, { additionalProperties: true }) },
  { additionalProperties: false, description: 'A tool definition in the Messages API format.' }
)

/** The cold layer: search what compaction removed, read a session's current summary, get the recall tool. */
export const memoryRoutes: FastifyPluginAsync = async (app) => {
  const { store, metrics } = app
  const typed = app.withTypeProvider<TypeBoxTypeProvider>()
  typed.post(
    '/v1/sessions/:session_id/recall',
    {
      schema: {
        tags: ['memory'],
        operationId: 'recallSession',
        summary: 'Search what compactions of this session removed; best matches first, each with its citation',
        security: KEYED,
        params: SessionParams,
        body: RecallRequest,
        response: {
          200: RecallResponse,
          400: Type.Ref('ErrorResponse', { description: 'The body breaks the schema.' }),
          ...keyedResponses(),
          413: Type.Ref('ErrorResponse', { description: 'The body is over COMPACT_BODY_LIMIT_MB.' }),
          415: Type.Ref('ErrorResponse', { description: 'The body is not JSON, or is sent with a Content-Encoding.' }),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read, or too many request bytes are in flight.' })
        }
      }
    },
    async (request) => {
      const body: Static<typeof RecallRequest> = request.body
      try {
        const results = await store.recall(request.params.session_id, request.keyName, {
          text: body.query,
          limit: body.limit ?? DEFAULT_RECALL_LIMIT,
          ...(body.kinds ? { kinds: body.kinds } : {})
        })
        metrics.recallRequests.inc({ outcome: results.length > 0 ? 'hits' : 'empty' })
        metrics.recallHits.inc(results.length)
        return { results }
      } catch (err) {
        metrics.recallRequests.inc({ outcome: 'failed' })
        metrics.storeErrors.inc({ operation: 'recall' })
        throw err // the store says what failed (ReadYourWrites)
      }
    }
  )

  typed.get(
    '/v1/sessions/:session_id/recap',
    {
      schema: {
        tags: ['memory'],
        operationId: 'recapSession',
        summary: "The session's current summary (id, text, sections) and how many compactions it has had",
        security: KEYED,
        params: SessionParams,
        response: {
          200: RecapResponse,
          ...keyedResponses(),
          404: Type.Ref('ErrorResponse', { description: "No compaction of this session (or not the caller's)." }),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      let recap
      try {
        recap = await store.recap(request.params.session_id, request.keyName)
      } catch (err) {
        metrics.storeErrors.inc({ operation: 'recap' })
        throw err // the store says what failed (ReadYourWrites)
      }
      if (!recap) throw new NotFoundError(`no compaction of session "${request.params.session_id}"`, '/session_id')
      const { record } = recap
      return {
        session_id: request.params.session_id,
        summary: { id: record.id, text: record.summary.text, sections: record.summary.sections },
        created_at: record.created_at,
        compactions: recap.compactions
      }
    }
  )

  typed.get(
    '/v1/tools/recall',
    {
      schema: {
        tags: ['memory'],
        operationId: 'getRecallTool',
        summary: 'The recall tool, ready to add to the tools of a Messages API request',
        security: KEYED,
        response: { 200: RecallTool, ...keyedResponses() }
      }
    },
    async () => RECALL_TOOL
  )
}
