/** The API formats a history may come in besides the Messages API's: adapters at the edge of the core. */
import { chatRules } from './chat.js'
import type { FormatRules } from './history.js'
import { responsesRules } from './responses.js'
import { geminiRules } from './gemini.js'

export { type Adapted, type Given, adaptHistory, givenBack, settable, withCleared } from './history.js'

export const FORMATS = ['anthropic', 'openai-chat', 'openai-responses', 'gemini'] as const
export type Format = (typeof FORMATS)[number]

/** The rules of a format other than the Messages API's (which the core reads as it is). */
export function rulesOf(format: Exclude<Format, 'anthropic'>): FormatRules {
  return format === 'openai-chat' ? chatRules : format === 'gemini' ? geminiRules : responsesRules
}
