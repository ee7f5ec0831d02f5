import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { GatewayError } from '../../contract/errors.js'
import { urlPartValidatorCompiler } from '../../contract/validation.js'
import { SessionId } from '../../contract/schemas.js'
import { DEFAULT_OVERVIEW_DAYS, MAX_OVERVIEW_DAYS } from '../../contract/defaults.js'
import { HOUR_MS, type Prices, WAIT_BOUNDS_MS, savingsAt } from '../../service/activity.js'
import { KEYED, keyedResponses } from './security.js'

const DAY_MS = 24 * HOUR_MS
/** A range up to this long is drawn by the hour; a longer one by the day. */
const HOURLY_UP_TO_MS = 2 * DAY_MS

const Count = (description: string) => Type.Integer({ minimum: 0, description })
const Money = (description: string) => Type.Number({ description })

const UpstreamUsage = Type.Object(
  {
    input_tokens: Type.Integer({ minimum: 0 }),
    cache_creation_input_tokens: Type.Integer({ minimum: 0 }),
    cache_read_input_tokens: Type.Integer({ minimum: 0 }),
    output_tokens: Type.Integer({ minimum: 0 })
  },
  { additionalProperties: false, description: 'Tokens as the upstream billed them, summed.' }
)

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

const OverviewSchema = Type.Object(
  {
    from: Type.String({ format: 'date-time', description: 'The start of the first hour of the range.' }),
    to: Type.String({ format: 'date-time' }),
    session_id: Type.Union([Type.String(), Type.Null()], { description: 'The session read, or null for every conversation of the key.' }),
    bucket: Type.Enum(['hour', 'day'], { description: "The series' step: an hour for a range up to two days, else a day (24 hours from `from`)." }),
    compactions: Type.Object(
      {
        total: Count('Compactions made.'),
        via_proxy: Count('Made by a proxy as a request crossed its budget.'),
        via_compact_route: Count('Answered by POST /v1/compact.'),
        tokens_before: Count('Their prompts before them, summed.'),
        tokens_after: Count('Their prompts after them, summed.'),
        tokens_removed: Type.Integer({ description: 'The difference: what the compactions took out of the prompts they were made for.' })
      },
      { additionalProperties: false }
    ),
    clearings: Type.Object(
      {
        count: Count('Crossings answered by clearing old tool results (COMPACT_STRATEGY clear or hybrid): nothing was summarized.'),
        tool_results: Count('The tool results they cleared (each kept whole in the cold layer).'),
        tokens_cleared: Count('The tokens that went.')
      },
      { additionalProperties: false }
    ),
    summaries: Type.Object(
      {
        model: Count("Written by a model (the gateway's own, or the client's own through the proxy)."),
        extractive_chosen: Count('Written by the extractive summarizer because it was the one configured (or no model key was set).'),
        fallback: Count('Written by the extractive summarizer because the model failed.'),
        cache: Count('Taken from the summary cache (the same history summarized before).'),
        fallback_reasons: Type.Record(Type.String(), Type.Integer(), { description: 'The fallbacks by why the model failed (timeout, rate_limited, ...).' }),
        models: Type.Record(Type.String(), Type.Integer(), { description: 'The model-written summaries by model.' })
      },
      { additionalProperties: false, description: "Who wrote the compactions' summaries." }
    ),
    crossings: Type.Object(
      {
        count: Count('Proxied requests that crossed their budget and were forwarded compacted.'),
        mean_wait_ms: Type.Union([Type.Number(), Type.Null()], {
          description: 'How long such a request waited, from its arrival to its forwarding, on average, to a tenth of a millisecond; null with none.'
        }),
        max_wait_ms: Type.Union([Type.Number(), Type.Null()], { description: 'The longest, to a tenth of a millisecond.' }),
        waits: Type.Array(
          Type.Object(
            {
              up_to_ms: Type.Union([Type.Integer(), Type.Null()], { description: "The bucket's upper bound; null for the waits past the last." }),
              count: Type.Integer()
            },
            { additionalProperties: false }
          ),
          {
            description: `The waits by bucket (up to ${WAIT_BOUNDS_MS.join(', ')} ms, and more).`
          }
        )
      },
      { additionalProperties: false }
    ),
    requests: Type.Object(
      {
        count: Count('Requests the proxies answered (200).'),
        tokens_kept_out: Count("Tokens compaction kept out of them: the client's history less what was forwarded."),
        metered: Count("Those whose answers' usage the proxy reads (the Messages API's)."),
        metered_tokens_kept_out: Count('The tokens kept out of the metered ones.'),
        metered_tokens_kept_out_cached: Count('Of those, the ones kept out of requests that read from the prompt cache (they would have been cache reads).'),
        upstream: UpstreamUsage
      },
      { additionalProperties: false }
    ),
    summary_calls: Type.Object(
      { calls: Count('Model calls the gateway made to write summaries (used or not).'), input_tokens: Count(''), output_tokens: Count('') },
      { additionalProperties: false }
    ),
    savings: Type.Object(
      {
        prices: Type.Object(
          {
            currency: Type.String({ description: 'The currency of the prices and the estimate (COMPACT_PRICE_CURRENCY, an ISO 4217 code).' }),
            input: Type.Number({ description: 'Per million input tokens (COMPACT_PRICE_INPUT).' }),
            output: Type.Number({ description: 'COMPACT_PRICE_OUTPUT.' }),
            cache_write: Type.Number({ description: 'COMPACT_PRICE_CACHE_WRITE.' }),
            cache_read: Type.Number({ description: 'COMPACT_PRICE_CACHE_READ.' })
          },
          { additionalProperties: false }
        ),
        billed: Money("The metered requests at the upstream's own usage, plus the summary calls (their input uncached)."),
        without_compaction: Money(
          'The same requests, each also sending what compaction kept out of it (at the cache-read price where it read from the cache, else at the input price), and no summary call.'
        ),
        saved: Money('The difference (negative: compaction cost more than it saved).'),
        saved_share: Type.Union([Type.Number(), Type.Null()], { description: 'saved / without_compaction; null where nothing was metered.' })
      },
      {
        additionalProperties: false,
        description:
          "An estimate, in the prices' currency (per the whole range, not per million): a floor of what compaction saved (a longer prompt would also have written more to the cache)."
      }
    ),
    series: Type.Array(
      Type.Object(
        {
          at: Type.String({ format: 'date-time', description: "The bucket's start." }),
          compactions: Type.Integer(),
          tokens_removed: Type.Integer(),
          tokens_kept_out: Type.Integer(),
          crossings: Type.Integer()
        },
        { additionalProperties: false }
      ),
      { description: 'The range by bucket, oldest first.' }
    )
  },
  {
    additionalProperties: false,
    description:
      "What the gateway did for the key over a range: its compactions, their summaries, the crossings' waits, what was kept out of prompts and what that saved."
  }
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
      validatorCompiler: urlPartValidatorCompiler,
      schema: {
        tags: ['compaction'],
        operationId: 'getOverview',
        summary: 'What the gateway did for the caller over a range: compactions, who wrote the summaries, crossing waits, tokens kept out and what that saved',
        description:
          'Read from tallies kept by the hour (numbers only, kept COMPACT_RETENTION_DAYS), for the key or one of its sessions. The estimate is made at COMPACT_PRICE_INPUT, _OUTPUT, _CACHE_WRITE and _CACHE_READ per million tokens.',
        security: KEYED,
        querystring: OverviewQuery,
        response: {
          200: OverviewSchema,
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
      const figures = await app.activity.figures(request.keyName, session, { fromMs: start, toMs }, bucketMs)
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
