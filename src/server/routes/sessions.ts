import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { decodeCursor, encodeCursor } from '../../storage/common.js'
import { NotFoundError } from '../../contract/errors.js'
import { SessionId, TimelinePoint } from '../../contract/schemas.js'
import { SessionCost } from '../../contract/reports.js'
import { KEYED, keyedResponses } from './security.js'
import { deleteSession } from '../../service/sessions.js'
import { costEstimate } from '../../service/costs.js'
import { CompactionCacheFigures } from '../../contract/reports.js'
import { dropFlights } from '../../storage/redis.js'
import { DEFAULT_PAGE_SIZE, DEFAULT_TIMELINE_POINTS, MAX_TIMELINE_POINTS, MAX_PAGE_SIZE } from '../../contract/defaults.js'

const SessionCompactions = Type.Object(
  {
    session_id: Type.String(),
    compactions: Type.Array(Type.Ref('CompactionRecord'), { description: 'Newest first.' }),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next, older page; null on the last page.' })
  },
  { additionalProperties: false, description: "The caller's compactions of this session. A session that is not the caller's reads exactly like an empty one." }
)

const SessionList = Type.Object(
  {
    sessions: Type.Array(
      Type.Object(
        {
          session_id: Type.String(),
          compactions: Type.Integer({ minimum: 1 }),
          first_at: Type.String({ format: 'date-time', description: 'When its first compaction was.' }),
          last_at: Type.String({ format: 'date-time', description: 'When its newest compaction was: its last activity here.' }),
          last_compaction_id: Type.String(),
          raw_history_tokens: Type.Integer({ description: "The newest compaction's prompt before it." }),
          context_after_compaction: Type.Integer({ description: "The newest compaction's prompt after it." })
        },
        { additionalProperties: false }
      ),
      { description: 'The one with the newest compaction first.' }
    ),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last page.' })
  },
  { additionalProperties: false, description: "The caller's sessions: those its key compacted with a session id. Another key's never appear." }
)

const Page = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, description: `Per page, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE}).` })),
    cursor: Type.Optional(Type.String({ maxLength: 200 }))
  },
  { additionalProperties: false }
)

/** The path of one compaction of a session. */
const CompactionParams = Type.Object({
  session_id: SessionId('The session.'),
  compaction_id: Type.String({ minLength: 1, maxLength: 200, description: 'The compaction (its summary id).' })
})

const EntryList = Type.Object(
  {
    entries: Type.Array(
      Type.Object(
        {
          kind: Type.String({ description: 'ask, answer, command, error, evidence or file.' }),
          text: Type.String({ description: 'The passage as kept (redacted).' }),
          messages: Type.Array(Type.Integer({ minimum: 0 }), {
            minItems: 2,
            maxItems: 2,
            description: '[from, to]: the first and last message, in the history as compacted, that the entry came from.'
          })
        },
        { additionalProperties: false }
      )
    ),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass back as `cursor` for the next page; null on the last.' })
  },
  {
    additionalProperties: false,
    description: "A compaction's cold-layer entries; none for another key's session, a compaction of no session, or one whose session kept no cold layer."
  }
)

const CompactionDetailSchema = Type.Object(
  {
    compaction: Type.Ref('CompactionRecord'),
    removed: Type.Union([
      Type.Object(
        { from: Type.Integer({ minimum: 0 }), to: Type.Integer({ minimum: 0 }), messages: Type.Integer({ minimum: 1 }) },
        {
          additionalProperties: false,
          description: "The indices (inclusive) of the request's messages the summary turn replaced; the tail after them was kept raw."
        }
      ),
      Type.Null()
    ]),
    cold_layer: Type.Record(Type.String(), Type.Integer(), {
      description: "This compaction's cold-layer entries, by kind (searchable with /recall); empty where the session kept none."
    }),
    cache: Type.Union([CompactionCacheFigures, Type.Null()], {
      description:
        "The prompt cache around this compaction, where it was a proxy's and the upstream's usage was read: its crossing request's and the next ones'; null otherwise."
    })
  },
  { additionalProperties: false, description: 'One compaction: its record (summary, figures, summarizer), what it removed and what its cold layer keeps.' }
)

const DeletedSessionSchema = Type.Object(
  {
    session_id: Type.String(),
    deleted: Type.Object(
      {
        compactions: Type.Integer({ minimum: 0, description: 'Compaction records (with their summaries).' }),
        cold_layer: Type.Integer({ minimum: 0, description: 'Cold-layer entries.' }),
        cached: Type.Integer({ minimum: 0, description: "Cached model summaries and the proxy's saved anchors." }),
        conversations: Type.Integer({ minimum: 0, description: "The proxy's conversations of the session this replica held in memory." })
      },
      { additionalProperties: false }
    ),
    space_reclaimed: Type.Boolean({
      description:
        'Whether the bytes they took were overwritten or rewritten too (SQLite: zeroed pages and an emptied WAL; PostgreSQL: the tables rewritten), not only unlinked. False where that step failed after the rows were deleted: deleting again retries it.'
    })
  },
  { additionalProperties: false, description: 'What was deleted: all zeros when the session had nothing here (a second delete, or another key’s session).' }
)

const TimelineSchema = Type.Object(
  {
    session_id: Type.String(),
    points: Type.Array(TimelinePoint, { description: 'Oldest first: the newest `limit` compactions.' }),
    complete: Type.Boolean({ description: 'Whether these are all its compactions (false: older ones were left out).' })
  },
  { additionalProperties: false, description: "A session's compactions as a chart draws them: the prompt's size before and after each, and the budget." }
)

export const sessionRoutes: FastifyPluginAsync = async (app) => {
  const { store } = app
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/sessions/:session_id/timeline',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'getSessionTimeline',
        summary: "A session's prompt size before and after each compaction, oldest first, for a chart",
        security: KEYED,
        params: Type.Object({ session_id: SessionId('The session.') }),
        querystring: Type.Object(
          {
            limit: Type.Optional(
              Type.Integer({ minimum: 1, maximum: MAX_TIMELINE_POINTS, description: `The newest this many compactions (default ${DEFAULT_TIMELINE_POINTS}).` })
            )
          },
          { additionalProperties: false }
        ),
        response: {
          200: TimelineSchema,
          400: Type.Ref('ErrorResponse', { description: 'A bad limit.' }),
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      const sessionId = request.params.session_id
      const limit = request.query.limit ?? DEFAULT_TIMELINE_POINTS
      const points = await store.timeline(sessionId, request.keyName, limit + 1)
      return { session_id: sessionId, points: points.slice(-limit), complete: points.length <= limit }
    }
  )

  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/sessions/:session_id/cost',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'getSessionCost',
        summary: "What a session's proxied requests cost, from the upstream's own usage, and what compaction saved (an estimate)",
        security: KEYED,
        params: Type.Object({ session_id: SessionId('The session.') }),
        response: {
          200: SessionCost,
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      const sessionId = request.params.session_id
      const cost = await app.activity.sessionCost(request.keyName, sessionId)
      return { session_id: sessionId, ...cost, control: cost.control ?? false, estimate: costEstimate(cost) }
    }
  )

  app.withTypeProvider<TypeBoxTypeProvider>().delete(
    '/v1/compactions/:compaction_id',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'deleteCompaction',
        summary: 'Deletes a compaction made without a session_id (its record, sealed under a key of its own, and that key), by its id',
        description: "Only the caller's own; a compaction of a session is deleted with its session (DELETE /v1/sessions/{session_id}).",
        security: KEYED,
        params: Type.Object({ compaction_id: Type.String({ minLength: 1, maxLength: 200, description: 'The compaction (its summary id, `cmp_…`).' }) }),
        response: {
          200: Type.Object({ compaction_id: Type.String(), deleted: Type.Boolean() }, { additionalProperties: false }),
          ...keyedResponses(),
          404: Type.Ref('ErrorResponse', { description: "No compaction of that id without a session is the caller's." }),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be written right now: delete again.' })
        }
      }
    },
    async (request) => {
      const id = request.params.compaction_id
      if (!(await store.deleteCompaction(id, request.keyName))) throw new NotFoundError(`no compaction "${id}" made without a session`, '/compaction_id')
      request.log.info({ event: 'compaction_deleted', summary_id: id }, 'compaction deleted')
      return { compaction_id: id, deleted: true }
    }
  )

  app.withTypeProvider<TypeBoxTypeProvider>().delete(
    '/v1/sessions/:session_id',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'deleteSession',
        summary: 'Deletes a session: its records, summaries, cold layer, cached summaries and anchors, and the space they took',
        description:
          "Only the caller's own session: another key's session of the same id is untouched (and the answer is all zeros). Idempotent. Writes of the session still landing are waited for first, so a compaction answered before the delete is deleted too.",
        security: KEYED,
        params: Type.Object({ session_id: SessionId('The session.') }),
        response: {
          200: DeletedSessionSchema,
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be written right now; nothing or part was deleted: delete again.' })
        }
      }
    },
    async (request) => {
      const sessionId = request.params.session_id
      const { proxy, redis } = app
      const result = await deleteSession(
        {
          store,
          forgetConversations: async (key, session) => {
            await app.activity.forget(key, session)
            proxy.clearing?.forget(`${key}\u0000${session}`)
            proxy.exchanges.forget(`${key}\u0000s:${session}\u0000`)
            return proxy.compactor.forget(key, session)
          },
          ...(redis ? { dropLocks: (keys: readonly string[]) => dropFlights(redis, keys) } : {}),
          onLockFault: (err) => request.log.warn({ err }, 'the locks of a deleted session could not be dropped from Redis (they expire on their own)')
        },
        request.keyName,
        sessionId
      )
      if (!result.space_reclaimed) request.log.warn({ reason: result.reclaim_failure }, 'a deleted session’s space was not reclaimed')
      request.log.info({ event: 'session_deleted', compactions: result.compactions, cold_layer: result.cold_layer, cached: result.cached }, 'session deleted')
      return {
        session_id: sessionId,
        deleted: { compactions: result.compactions, cold_layer: result.cold_layer, cached: result.cached, conversations: result.conversations },
        space_reclaimed: result.space_reclaimed
      }
    }
  )

  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/sessions/:session_id/compactions/:compaction_id',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'getCompaction',
        summary: 'One compaction of a session: its summary and figures, the messages it removed, its cold layer',
        security: KEYED,
        params: CompactionParams,
        response: {
          200: CompactionDetailSchema,
          404: Type.Ref('ErrorResponse', { description: "No such compaction of the caller's session." }),
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      const { session_id: sessionId, compaction_id: compactionId } = request.params
      const detail = await store.compaction(sessionId, request.keyName, compactionId)
      if (!detail) throw new NotFoundError(`no compaction "${compactionId}" of session "${sessionId}"`, '/compaction_id')
      const n = detail.record.stats.compacted_messages
      const cache = (await app.activity.cacheOf(request.keyName, sessionId, compactionId)) ?? null
      return { compaction: detail.record, removed: n > 0 ? { from: 0, to: n - 1, messages: n } : null, cold_layer: detail.memory, cache }
    }
  )

  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/sessions/:session_id/compactions/:compaction_id/entries',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'listCompactionEntries',
        summary: 'What one compaction removed, as its cold layer keeps it: its entries in the order of the messages they came from, paginated',
        security: KEYED,
        params: CompactionParams,
        querystring: Page,
        response: {
          200: EntryList,
          400: Type.Ref('ErrorResponse', { description: 'A bad limit or cursor.' }),
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      const { session_id: sessionId, compaction_id: compactionId } = request.params
      const after = request.query.cursor ? decodeCursor(request.query.cursor) : 0
      const page = await store.entries(sessionId, request.keyName, compactionId, { after, limit: request.query.limit ?? DEFAULT_PAGE_SIZE })
      return { entries: page.entries, next_cursor: page.last === null ? null : encodeCursor(page.last) }
    }
  )

  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/sessions',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'listSessions',
        summary: "The caller's sessions, newest activity first, paginated",
        security: KEYED,
        querystring: Page,
        response: {
          200: SessionList,
          400: Type.Ref('ErrorResponse', { description: 'A bad limit or cursor.' }),
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => store.listSessions(request.keyName, { limit: request.query.limit ?? DEFAULT_PAGE_SIZE, cursor: request.query.cursor })
  )
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/sessions/:session_id/compactions',
    {
      // `?limit=20` is text; this route's URL parts are checked with coercion (it has no body).
      schema: {
        tags: ['compaction'],
        operationId: 'listSessionCompactions',
        summary: "A session's compaction records, newest first, paginated",
        security: KEYED,
        params: Type.Object({ session_id: SessionId('The session.') }),
        querystring: Type.Object(
          {
            limit: Type.Optional(
              Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, description: `Records per page, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE}).` })
            ),
            cursor: Type.Optional(Type.String({ maxLength: 200 }))
          },
          { additionalProperties: false }
        ),
        response: {
          200: SessionCompactions,
          400: Type.Ref('ErrorResponse', { description: 'A bad limit or cursor.' }),
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      const limit = request.query.limit ?? DEFAULT_PAGE_SIZE
      const page = await store.listRecords(request.params.session_id, request.keyName, { limit, cursor: request.query.cursor })
      return { session_id: request.params.session_id, compactions: page.records, next_cursor: page.next_cursor }
    }
  )
}
