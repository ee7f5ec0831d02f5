import { type Static, Type } from 'typebox'
import { WAIT_BOUNDS_MS } from './defaults.js'

/**
 * The answers of the service's reports, whose types the page reads too (src/ui): what the overview and a
 * session's cost give, one definition for the route, its contract and the page.
 */

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

/** The prompt cache around proxied compactions, as the upstreams' own usage reports it. */
export const CompactionCacheFigures = Type.Object(
  {
    crossings: Count('Requests that crossed their budget (compacted there) whose usage the proxy read.'),
    crossing_read: Count('Their input read from the prompt cache (what the rewrite left in place: system prompt, tools).'),
    crossing_written: Count('Their input written to the cache (the rewritten prefix).'),
    invalidated: Count(
      "What the cache held of those conversations just before (the previous answer's cache read and written) that the crossing no longer read."
    ),
    after_requests: Count('Requests after a compaction that carried its summary, whose usage the proxy read.'),
    after_read: Count('Their input read from the cache.'),
    after_written: Count('Their input written to the cache.')
  },
  {
    additionalProperties: false,
    description:
      "The prompt cache around compactions, from the upstream's own usage (the Messages API reports writes; OpenAI's and Gemini's APIs reads only): what a compaction cost in cache and what the requests after it read back."
  }
)

const GroupFigures = Type.Object(
  {
    requests: Count('Metered requests of the group in the bin.'),
    units_per_request: Type.Union([Type.Integer(), Type.Null()], {
      description: 'Their mean billed units (the treated: with their summary calls spread over them); null with none.'
    })
  },
  { additionalProperties: false }
)

/** GET /v1/overview's answer. */
export const Overview = Type.Object(
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
        metered: Count("Those whose answers' usage the proxy read (every API's, the others' in the Messages API's terms: cached input as cache reads)."),
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
    compaction_cache: CompactionCacheFigures,
    measured: Type.Union(
      [
        Type.Object(
          {
            treated_requests: Count('Metered requests of conversations the gateway compacted as it does (with a session).'),
            control_requests: Count('Metered requests of conversations of the control group (COMPACT_CONTROL_SHARE), sent through uncompacted.'),
            bins: Type.Array(
              Type.Object(
                {
                  from_tokens: Count("The bin's shortest history, in tokens as the client sent it."),
                  to_tokens: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: "The next bin's; null for the last." }),
                  treated: GroupFigures,
                  control: GroupFigures
                },
                { additionalProperties: false }
              ),
              { description: 'Requests by the length of the history the client sent: conversations of similar length side by side.' }
            ),
            saved_share: Type.Union([Type.Number(), Type.Null()], {
              description:
                "1 − the treated requests' billed units over the control's, bin by bin weighed by the control's requests, the treated conversations' summary calls spread over their requests; null where no bin has both groups."
            }),
            interval: Type.Union([Type.Object({ low: Type.Number(), high: Type.Number() }, { additionalProperties: false }), Type.Null()], {
              description: 'Its 95% interval (normal approximation); null where a bin both groups share has fewer than two requests of one.'
            })
          },
          { additionalProperties: false }
        ),
        Type.Null()
      ],
      {
        description:
          'What compaction saved, measured against a control group of conversations sent through uncompacted (COMPACT_CONTROL_SHARE), in billed units (input 1x, cache writes 1.25x, reads 0.1x, output 5x); null where no control request was metered.'
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
export type Overview = Static<typeof Overview>

const Tokens = (description: string) => Type.Integer({ minimum: 0, description })
/** GET /v1/sessions/{id}/cost's answer. */
export const SessionCost = Type.Object(
  {
    session_id: Type.String(),
    requests: Tokens('Requests of the session whose usage the proxies read, since its cost was first kept.'),
    control: Type.Boolean({ description: 'The session is in the control group (COMPACT_CONTROL_SHARE): its conversation went through uncompacted.' }),
    upstream: Type.Object(
      {
        input_tokens: Tokens('Uncached input, as the upstream reported it.'),
        cache_creation_input_tokens: Tokens('Input written to the prompt cache.'),
        cache_read_input_tokens: Tokens('Input read from the prompt cache.'),
        output_tokens: Tokens('Output.')
      },
      { additionalProperties: false, description: "The sum of the upstream's own `usage` over the session's answers (where an answer gave one)." }
    ),
    tokens_kept_out: Tokens("What compaction kept out of the forwarded requests: the client's history less what was sent, summed (estimated from bytes)."),
    kept_out_units: Type.Number({
      minimum: 0,
      description:
        'What those tokens would have cost, in input-token units: at the cache-read price (0.1x) where the request read from the cache, else at the input price.'
    }),
    summary_calls: Tokens("Model calls made for the session's summaries (the gateway's model or the client's; used or not)."),
    summary_input_tokens: Tokens('Their input.'),
    summary_output_tokens: Tokens('Their output.'),
    estimate: Type.Object(
      {
        billed_units: Tokens(
          'What the session was billed, in uncached-input-token units: input 1x, cache writes 1.25x, reads 0.1x, output 5x; the summary calls counted uncached.'
        ),
        uncompacted_units: Tokens(
          'What it would have been billed without compaction, at least: the same answers, each request also sending what compaction kept out of it (`kept_out_units`), and no summary calls.'
        ),
        saved_units: Type.Integer({ description: 'The difference (negative: compaction cost more than it saved).' }),
        saved_share: Type.Number({ description: 'saved_units over uncompacted_units.' })
      },
      { additionalProperties: false }
    )
  },
  { additionalProperties: false, description: "A session's cost through the proxy, and the estimate of what compaction saved." }
)
export type SessionCost = Static<typeof SessionCost>
