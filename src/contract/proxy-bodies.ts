import { type Static, Type } from 'typebox'
import type { Message as CoreMessage } from '../compaction/types.js'

/**
 * The proxies' request bodies as the gateway reads them: each schema is what the route documents and what
 * its reader checks a body against (contract/validation.ts's `bodyReader`), once the body is read. A body
 * under its budget is forwarded unread, so nothing here is checked of it; everything a schema leaves open
 * (`passed`) goes to the upstream as it came, for the upstream to judge. A history's items are the format's
 * to read (formats/): where the history may pass its budget an item that cannot be read is refused, naming
 * it; under it, it is passed on as sent.
 */

const AnyObject = Type.Object({}, { additionalProperties: true })
/** A field the gateway does not check: passed to the upstream as sent. */
const passed = (description: string) => Type.Optional(Type.Unknown({ description }))
const Tools = Type.Optional(Type.Array(AnyObject, { description: 'Counted toward the prompt, never compacted.' }))

/** POST /v1/messages and /v1/messages/count_tokens. */
export const MessagesBody = Type.Object(
  {
    model: passed('The model: passed to the upstream as sent, as every field the gateway does not read.'),
    messages: Type.Array(Type.Unsafe<CoreMessage>(Type.Ref('Message')), {
      description: "The history, read as /v1/compact reads it (each block's fields as its type needs them) where it may pass its budget."
    }),
    system: Type.Optional(Type.Union([Type.String(), Type.Array(AnyObject)], { description: 'Counted, never compacted.' })),
    tools: Tools,
    metadata: passed('`metadata.user_id`, a string, names the session when no session header does.')
  },
  {
    additionalProperties: true,
    description:
      'A Messages API request, as the Anthropic SDKs send it. Every field passes to the upstream unchanged, but for `messages` when they are compacted.'
  }
)
export type MessagesBody = Static<typeof MessagesBody>

/** POST /v1/chat/completions. */
export const ChatCompletionsBody = Type.Object(
  {
    model: passed('The model: passed upstream as sent, as every field the gateway does not read.'),
    messages: Type.Array(Type.Unknown(), {
      description:
        'Leading system and developer messages are the system prompt (counted, sent as they came); the rest may be compacted into one user message that carries the summary.'
    }),
    tools: Tools,
    prompt_cache_key: passed('A string: names the session when no session header does.')
  },
  {
    additionalProperties: true,
    description: 'A Chat Completions request, as the OpenAI SDKs send it. Every field passes upstream unchanged, but for `messages` when they are compacted.'
  }
)
export type ChatCompletionsBody = Static<typeof ChatCompletionsBody>

/** What both Responses endpoints read: the history (`input`), where it may be held upstream instead, and the session. */
const RESPONSES_HISTORY = {
  model: passed('The model: passed upstream as sent, as every field the gateway does not read.'),
  input: Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.Unknown())], {
      description:
        'Leading system and developer items (of any type) are the system prompt; calls and their outputs are paired by `call_id`, reasoning items stay with their turn, items of types the gateway does not know pass untouched. A string is one message: never compacted.'
    })
  ),
  instructions: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Counted as the system prompt, never compacted.' })),
  previous_response_id: passed('The history is held upstream: the request is forwarded unread (`x-compaction-not-read: previous_response_id`).'),
  prompt_cache_key: passed('A string: names the session when no session header does (Codex sends its thread id).'),
  tools: Tools
}

/** POST /v1/responses. */
export const ResponsesBody = Type.Object(
  {
    ...RESPONSES_HISTORY,
    conversation: passed('The history is held upstream: the request is forwarded unread (`x-compaction-not-read: conversation`).')
  },
  {
    additionalProperties: true,
    description: 'A Responses API request, as the OpenAI SDKs and Codex send it. Every field passes upstream unchanged, but for `input` when it is compacted.'
  }
)
export type ResponsesBody = Static<typeof ResponsesBody>

/** POST /v1/responses/compact. */
export const ResponsesCompactBody = Type.Object(RESPONSES_HISTORY, {
  additionalProperties: true,
  description:
    "A compaction request of the Responses API (`client.responses.compact`, Codex's remote compaction). Every field passes upstream unchanged, but for `input` when it is compacted."
})

/** POST /v1beta/models/{model}:generateContent, :streamGenerateContent and :countTokens. */
export const GenerateContentBody = Type.Object(
  {
    contents: passed(
      "The history, an array of contents: a model content's functionCall parts are answered by the next user content's functionResponse parts; it may be compacted into one user content that carries the summary, then the kept contents as sent."
    ),
    systemInstruction: passed('Counted, never compacted.'),
    tools: Tools
  },
  {
    additionalProperties: true,
    description:
      'A generateContent request, as the Gemini SDKs and Gemini CLI send it. Every field passes upstream unchanged, but for `contents` when they are compacted.'
  }
)
export type GenerateContentBody = Static<typeof GenerateContentBody>
