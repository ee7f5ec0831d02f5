import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { GatewayError } from '../../contract/errors.js'
import { SessionId } from '../../contract/schemas.js'
import { Overview } from '../../contract/reports.js'
import { DEFAULT_OVERVIEW_DAYS, MAX_OVERVIEW_DAYS } from '../../contract/defaults.js'
import { HOUR_MS, type Prices, savingsAt } from '../../service/activity.js'
import { KEYED, keyedResponses } from './security.js'

const DAY_MS = 24 * HOUR_MS
/** A range up to this long is drawn by the hour; a longer one by the day. */
const HOURLY_UP_TO_MS = 2 * DAY_MS

/** An RFC 3339 time, as `new Date().toISOString()` writes it (seconds and zone optional). */
const RFC3339 = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:\\d{2})$'

/** A time of the query as ms, or a 400 naming it where it is no time (the 13th month). */
function timeOf(name: 'from' | 'to', text: string): number {
  const ms = Date.parse(text)
  if (Number.isNaN(ms)) throw badRange(name, `is not a time: ${JSON.stringify(text)} (send an RFC 3339 time, such as 2026-12-01T00:00:00Z)`)
  return ms
}

const OverviewQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        pattern: RFC3339,
        maxLength: 40,
        description: `The range's start (an RFC 3339 time); ${DEFAULT_OVERVIEW_DAYS} days before \`to\` by default.`
      })
    ),
    to: Type.Optional(Type.String({ pattern: RFC3339, maxLength: 40, description: "The range's end (an RFC 3339 time); now by default." })),
    session_id: Type.Optional(SessionId("One session's figures instead of the key's total."))
  },
  { additionalProperties: false }
)

/** A bad range: the client's mistake, a 400 naming the parameter. */
function badRange(name: 'from' | 'to', message: string): GatewayError {
  return new GatewayError('invalid_request', `querystring.${name} ${message}`, { path: `/${name}` })
}

/** GET /v1/overview: the page's first view, from the tallies of what the gateway did (service/activity.ts). */
declare module 'fastify' {
  interface FastifyInstance {
    /** COMPACT_PRICE_*: the prices the overview's estimate is made at. */
    prices: Prices
  }
}

export const overviewRoutes: FastifyPluginAsync = async (app) => {
  const { prices } = app
  const now = (): number => app.activity.now()
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/overview',
    {
      schema: {
        tags: ['compaction'],
        operationId: 'getOverview',
        summary: 'What the gateway did for the caller over a range: compactions, who wrote the summaries, crossing waits, tokens kept out and what that saved',
        description:
          'Read from tallies kept by the hour (numbers only, kept COMPACT_RETENTION_DAYS), for the key or one of its sessions. The estimate is made at COMPACT_PRICE_INPUT, _OUTPUT, _CACHE_WRITE and _CACHE_READ per million tokens.',
        security: KEYED,
        querystring: OverviewQuery,
        response: {
          200: Overview,
          400: Type.Ref('ErrorResponse', { description: 'A bad time, a range that ends before it starts or is longer than a year, or a bad session id.' }),
          ...keyedResponses(),
          503: Type.Ref('ErrorResponse', { description: 'The store cannot be read.' })
        }
      }
    },
    async (request) => {
      const { query } = request
      const toMs = query.to === undefined ? now() : timeOf('to', query.to)
      const fromMs = query.from === undefined ? toMs - DEFAULT_OVERVIEW_DAYS * DAY_MS : timeOf('from', query.from)
      if (!(fromMs < toMs)) throw badRange('from', `must be before to (${new Date(toMs).toISOString()})`)
      if (toMs - fromMs > MAX_OVERVIEW_DAYS * DAY_MS) throw badRange('from', `must be at most ${MAX_OVERVIEW_DAYS} days before to`)
      const start = Math.floor(fromMs / HOUR_MS) * HOUR_MS
      const bucketMs = toMs - start <= HOURLY_UP_TO_MS ? HOUR_MS : DAY_MS
      const session = query.session_id ?? null
      const { byCompaction: _each, ...figures } = await app.activity.figures(request.keyName, session, { fromMs: start, toMs }, bucketMs)
      return {
        from: new Date(start).toISOString(),
        to: new Date(toMs).toISOString(),
        session_id: session,
        bucket: bucketMs === HOUR_MS ? ('hour' as const) : ('day' as const),
        ...figures,
        savings: savingsAt(figures, prices)
      }
    }
  )
}
