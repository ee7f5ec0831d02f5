import { type Static, Type } from 'typebox'
import { LIST_SECTIONS } from '../compaction/sections.js'
import type { Block as CoreBlock, Message as CoreMessage } from '../compaction/types.js'
import { compactRequestExample, compactResponseExample, errorExample } from './examples.js'
import { ERROR_TYPES, type ErrorType } from './errors.js'

/**
 * The HTTP contract as TypeBox schemas: one source for validation, the TypeScript types and
 * the OpenAPI document. Messages and blocks keep every field the client sent (additionalProperties),
 * because the tail goes back to the client as it came.
 */

export const Block = Type.Object(
  { type: Type.String({ minLength: 1, description: 'text, tool_use, tool_result, thinking, image, document, or any later type' }) },
  { additionalProperties: true, $id: 'Block', description: 'An Anthropic Messages content block; fields beyond `type` pass through untouched.' }
)

export const Message = Type.Object(
  {
    role: Type.Enum(['user', 'assistant', 'system'], {
      description:
        'system: a mid-conversation system message, where the Messages API places one (after a user message, before an assistant turn or last, text only); carried into the compacted history verbatim, never summarized.'
    }),
    content: Type.Union([Type.String(), Type.Array(Type.Ref('Block'))])
  },
  { additionalProperties: true, $id: 'Message', description: 'An Anthropic Messages API message (MessageParam).' }
)

/**
 * References to the two shapes above, typed as the core's Message and Block: the schema checks what the
 * core relies on (a role, content as text or blocks each with a type) and lets every other field pass,
 * so a validated body is the core's history as it stands, with no cast between them.
 */
const MessageRef = Type.Unsafe<CoreMessage>(Type.Ref('Message'))
const BlockRef = Type.Unsafe<CoreBlock>(Type.Ref('Block'))

/**
 * A session id as records keep it and a URL gives it back: 1 to 200 characters, no control character
 * (a NUL cannot be stored, and reads of it could never match), and not `.` or `..` (a path segment that
 * URLs resolve away, so the session could never be read back).
 */
export const SESSION_ID_PATTERN = '^(?!\\.{1,2}$)[^\\u0000-\\u001f\\u007f]+$'
export const SessionId = (description: string) => Type.String({ minLength: 1, maxLength: 200, pattern: SESSION_ID_PATTERN, description })

export const Usage = Type.Object(
  {
    input_tokens: Type.Integer({ minimum: 0 }),
    cache_creation_input_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
    cache_read_input_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]))
  },
  {
    additionalProperties: true,
    description: "The provider's usage report for the client's last prompt. The prompt's size is input_tokens plus the cache fields; other fields are not read."
  }
)

export const CompactRequest = Type.Object(
  {
    format: Type.Optional(
      Type.Enum(['anthropic', 'openai-chat', 'openai-responses', 'gemini'], {
        description:
          "The format of `messages`, and of the answer's: the Messages API's (the default), Chat Completions messages (`openai-chat`: leading system and developer messages are the system prompt, counted and returned as sent), Responses input items (`openai-responses`: calls and their outputs paired by call_id, reasoning items kept with their turn, an unknown item type passed untouched), or Gemini's `contents` (`gemini`: roles user and model; a model content's functionCall parts answered by the next user content's functionResponse parts, paired by name and order; parts with a thoughtSignature, thought parts and inline or file data kept as they came; `system` takes the systemInstruction's text)."
      })
    ),
    messages: Type.Array(
      Type.Union([
        MessageRef,
        Type.Object({}, { additionalProperties: true, description: 'With `format`: a Chat Completions message, a Responses input item, or a Gemini content.' })
      ]),
      {
        minItems: 1,
        description:
          "The client's history, in `format`: Messages API messages by default (each checked as the Message schema), else the other format's messages or items."
      }
    ),
    system: Type.Optional(Type.Union([Type.String(), Type.Array(BlockRef)], { description: 'Counted only, never returned.' })),
    tools: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }), { description: 'Counted only, never returned.' })),
    mode: Type.Optional(Type.Enum(['auto', 'manual'], { description: 'auto compacts over budget; manual whenever there is a span. Default auto.' })),
    budget_tokens: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1_000 }), Type.Literal('off')], {
        description: 'Prompt size that triggers auto compaction; the server default when absent.'
      })
    ),
    keep_tokens: Type.Optional(Type.Integer({ minimum: 100, description: 'Hard bound on the raw tail; one third of the budget when absent.' })),
    keep_turns: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000, description: 'At most this many prompt messages in the tail.' })),
    instructions: Type.Optional(
      Type.String({ maxLength: 4_000, description: "The user's focus for this compaction; added to the doctrine, never replacing it." })
    ),
    session_id: Type.Optional(SessionId('Ties records and logs to a client session.')),
    usage: Type.Optional(Usage),
    recall_hint: Type.Optional(Type.String({ maxLength: 2_000, description: 'How the agent can search its raw older turns; quoted in the summary turn.' })),
    summarizer: Type.Optional(
      Type.Enum(['auto', 'model', 'anthropic', 'openai', 'gemini', 'extractive'], {
        description:
          "auto: the server's model summarizer where it has one, else extractive (default). model: the server's model summarizer, a 400 where it has none; anthropic, openai: that one, a 400 where the server's is another or none. extractive: no model."
      })
    ),
    dry_run: Type.Optional(Type.Boolean({ description: 'Plan and report; call no summarizer.' })),
    strategy: Type.Optional(
      Type.Enum(['summarize', 'clear', 'hybrid'], {
        description:
          '`summarize` (the default): a summary turn replaces the old turns. `clear`: the old tool results (beyond the newest three) are replaced by placeholders that keep the call, its outcome and its signal lines (their outputs kept in the cold layer of the session), a summary only where that cannot bring the history under the budget. `hybrid`: clearing where it brings the history to half the room under the budget, else a summary. Messages API histories (`format: anthropic`) only.'
      })
    )
  },
  { additionalProperties: false, examples: [compactRequestExample] }
)
export type CompactRequestBody = Static<typeof CompactRequest>

/** What the service checks beyond the contract's schema: without another format, each message is a Messages API message. */
export const CompactRequestChecked = {
  ...CompactRequest,
  if: { properties: { format: { enum: ['openai-chat', 'openai-responses', 'gemini'] } }, required: ['format'] },
  else: { properties: { messages: { items: { $ref: 'Message' } } } }
}

const sectionProperties = Object.fromEntries(LIST_SECTIONS.map((k) => [k, Type.Array(Type.String())]))
export const SummarySectionsSchema = Type.Object(
  { objective: Type.String(), ...sectionProperties } as Record<string, ReturnType<typeof Type.String> | ReturnType<typeof Type.Array>>,
  {
    additionalProperties: false,
    $id: 'SummarySections'
  }
)

export const Stats = Type.Object(
  {
    raw_history_tokens: Type.Integer({ description: 'Estimated tokens of the request: messages, system and tools.' }),
    summary_tokens: Type.Integer(),
    compacted_turns: Type.Integer(),
    compacted_messages: Type.Integer(),
    kept_messages: Type.Integer(),
    kept_tokens: Type.Integer(),
    context_after_compaction: Type.Integer({ description: 'system + tools + summary turn + tail, estimated.' }),
    clipped_tool_results: Type.Integer({
      description:
        'How many strings of the kept tail the hard bound clipped, of every kind `clips` lists (tool results, tool inputs, prompts, assistant text, thinking): the name is older than the other kinds. `clips` says which.'
    }),
    guard_added: Type.Integer({ description: 'Facts the guard put back into a model summary from the ledger.' }),
    estimate_scale: Type.Number({ description: 'Factor applied to the estimate to match usage.input_tokens (1 without usage).' }),
    carried_context_tokens: Type.Integer({
      description:
        "Tokens of the compacted span's system messages and harness context (`<system-reminder>` blocks and the like) carried into the compacted history verbatim, the newest of each kind; counted in context_after_compaction."
    }),
    carried_context_dropped: Type.Integer({
      description: 'Kinds of such context left out, the oldest first, because carrying them would pass an eighth of the budget.'
    })
  },
  { additionalProperties: false, $id: 'Stats' }
)

export const Clip = Type.Object(
  {
    kind: Type.Enum(['prompt', 'text', 'thinking', 'tool_input', 'tool_result'], {
      description: "What was clipped: a user's prompt, assistant text, a thinking block, a string of a tool call's input, or a tool result."
    }),
    message_index: Type.Integer(),
    block_index: Type.Optional(Type.Integer({ description: "Absent when the message's content is one string." })),
    path: Type.String({ description: 'JSON pointer, in the request body, to the string that was clipped.' }),
    tool_use_id: Type.Optional(Type.String({ description: 'The call a clipped tool input or tool result belongs to.' })),
    original_chars: Type.Integer(),
    kept_chars: Type.Integer()
  },
  {
    additionalProperties: false,
    $id: 'Clip',
    description: 'A text of the kept tail clipped head and tail, with a marker saying how much was removed, so that the tail fits its bound.'
  }
)

/** Why the extractive summary stood in for a model's: every reason a summarizer can give (SummarizerReport's `fallback_reason`). */
export const FAULT_REASONS = [
  'no_api_key',
  'timeout',
  'rate_limited',
  'overloaded',
  'server_error',
  'connection_error',
  'auth_error',
  'bad_request',
  'refusal',
  'no_tool_call',
  'invalid_output',
  'cancelled'
] as const

export const SummarizerReport = Type.Object(
  {
    kind: Type.Enum(['anthropic', 'openai', 'gemini', 'extractive', 'cache'], {
      description:
        "Who wrote the summary: a model through the Messages API, an OpenAI-compatible one or Gemini's API, the extractive summarizer, or the summary cache."
    }),
    model: Type.Union([Type.String(), Type.Null()]),
    input_tokens: Type.Integer(),
    output_tokens: Type.Integer(),
    calls: Type.Integer(),
    fallback_reason: Type.Union([Type.Enum([...FAULT_REASONS]), Type.Null()], {
      description:
        'Why the extractive summary stands in for a model one: no_api_key, timeout, rate_limited, overloaded, server_error, connection_error, auth_error, bad_request, refusal, no_tool_call, invalid_output, cancelled. Null when none was needed.'
    }),
    duration_ms: Type.Number()
  },
  { additionalProperties: false, $id: 'SummarizerReport' }
)

export type SummarizerReportBody = Static<typeof SummarizerReport>

export const Reason = Type.Enum(['over_budget', 'under_budget', 'manual', 'disabled', 'nothing_to_compact', 'dry_run', 'cleared', 'cache_lapsed'], {
  description:
    'Why the history was or was not compacted; `cleared`: its old tool results were cleared (strategy clear or hybrid) and nothing was summarized; `cache_lapsed`: a proxied conversation past a share of its budget came back after its prompt cache lapsed, and was compacted then (its prefix was written to the cache again anyway).'
})

export const CompactResponse = Type.Object(
  {
    compacted: Type.Boolean(),
    reason: Reason,
    messages: Type.Optional(
      Type.Union([Type.Array(MessageRef), Type.Array(Type.Object({}, { additionalProperties: true }))], {
        description:
          "The new history, in the request's format: the system messages as sent (other formats), the summary turn, then the kept tail. Present only when compacted."
      })
    ),
    kept_from: Type.Integer({ description: "Index into the request's messages where the kept tail starts." }),
    summary: Type.Optional(Type.Object({ id: Type.String(), text: Type.String(), sections: Type.Ref('SummarySections') }, { additionalProperties: false })),
    clips: Type.Array(Type.Ref('Clip')),
    cleared: Type.Optional(
      Type.Array(
        Type.Object(
          {
            message: Type.Integer({ description: 'The index of the message whose tool result was cleared.' }),
            tool_use_id: Type.String(),
            tool: Type.String(),
            tokens: Type.Integer({ description: 'The tokens that went.' })
          },
          { additionalProperties: false }
        ),
        { description: 'With `reason: cleared`: the tool results replaced by placeholders; every other message is as sent.' }
      )
    ),
    stats: Type.Ref('Stats'),
    summarizer: Type.Optional(Type.Ref('SummarizerReport')),
    doctrine_version: Type.String()
  },
  {
    additionalProperties: false,
    description: 'The compaction, or why there was none. `messages` is the new history to send on.',
    examples: [compactResponseExample]
  }
)

export const ErrorResponse = Type.Object(
  {
    type: Type.Literal('error'),
    error: Type.Object(
      {
        type: Type.Unsafe<ErrorType>({
          type: 'string',
          enum: [...ERROR_TYPES],
          description: 'The kind of error, as the Anthropic API names it (its SDKs choose their error class by the status).'
        }),
        message: Type.String(),
        path: Type.Optional(Type.String({ description: 'JSON pointer to the offending place in the request body.' }))
      },
      { additionalProperties: false }
    )
  },
  { additionalProperties: false, $id: 'ErrorResponse', examples: [errorExample] }
)
export type ErrorResponseBody = Static<typeof ErrorResponse>

/** One compaction as the sessions route lists it (the storage layer's CompactionRecord agrees with it). */
export const CompactionRecordSchema = Type.Object(
  {
    id: Type.String(),
    session_id: Type.Union([Type.String(), Type.Null()]),
    key_name: Type.String({ description: "The API key's name ('' without auth); never the key." }),
    created_at: Type.String({ format: 'date-time' }),
    mode: Type.Enum(['auto', 'manual']),
    reason: Type.String(),
    budget_tokens: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], {
        description: "The budget the compaction was made under; null where it was 'off'. Absent from records made before it was kept."
      })
    ),
    stats: Type.Ref('Stats'),
    summarizer: Type.Ref('SummarizerReport'),
    doctrine_version: Type.String(),
    summary: Type.Object({ text: Type.String(), sections: Type.Ref('SummarySections') }, { additionalProperties: false }),
    crossing: Type.Optional(
      Type.Object(
        {
          because: Type.Enum(['over_limit', 'cache_cold', 'pays_back', 'reaches_limit'], {
            description:
              'Why the crossing was made then: `pays_back`, the conversation is expected to run long enough for the rewrite (the kept prompt written to the cache) to be paid back by the cache reads it saves; `reaches_limit`, it is expected to reach the limit first; `cache_cold`, its requests come further apart than the prompt cache lives, so each writes its prefix anyway; `over_limit`, the prompt passed the limit.'
          }),
          waited_requests: Type.Integer({
            minimum: 0,
            description: 'Requests forwarded over the budget, uncompacted, before it: a compaction then would not have paid back.'
          }),
          limit_tokens: Type.Integer({ description: 'The hard bound (COMPACT_LIMIT) the budget is a target under.' })
        },
        {
          additionalProperties: false,
          description: "A proxied crossing's timing where the budget is a target under a limit (COMPACT_LIMIT); absent otherwise."
        }
      )
    )
  },
  { additionalProperties: false, $id: 'CompactionRecord', description: 'What one compaction said and cost. The history itself is never kept.' }
)

/** One compaction as a chart shows it: when, and the prompt's size before and after it (the store reads these, the page draws them). */
export const TimelinePoint = Type.Object(
  {
    compaction_id: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    raw_history_tokens: Type.Integer({ description: 'The prompt before the compaction.' }),
    context_after_compaction: Type.Integer({ description: 'The prompt after it.' }),
    budget_tokens: Type.Union([Type.Integer(), Type.Null()], {
      description: "The budget it was made under; null for 'off' or where the record is older than this field."
    })
  },
  { additionalProperties: false }
)
export type TimelinePoint = Static<typeof TimelinePoint>

export const Health = Type.Object({ status: Type.String() }, { additionalProperties: false, description: 'The process answers.' })
export const Ready = Type.Object(
  { status: Type.String(), checks: Type.Record(Type.String(), Type.String()) },
  { additionalProperties: false, description: 'Readiness and the state of each dependency checked.' }
)

/** Schemas registered once with `addSchema`, so routes and the OpenAPI document refer to them by name. */
export const SHARED_SCHEMAS = [Block, Message, SummarySectionsSchema, Stats, Clip, SummarizerReport, ErrorResponse, CompactionRecordSchema]
