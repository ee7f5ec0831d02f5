import { type CompactionPlan, type Message, planCompaction } from '../../src/compaction/index.js'
import { type Adapted, adaptHistory, rulesOf } from '../../src/formats/index.js'

/** The plan a conversation summary is asked for: a manual compaction of `messages` at a budget of 20,000, the last two turns (up to 2,000 tokens) kept. */
export function conversationPlan(messages: Message[]): CompactionPlan {
  return planCompaction({ messages, mode: 'manual', budgetTokens: 20_000, sizingBudgetTokens: 20_000, keepTokens: 2_000, keepTurns: 2, dryRun: false })
}

/** A client's items in an API's format read into the core's messages (`starts`: where each begins among the items), and the plan of their summary. */
export function planOfItems(items: Record<string, unknown>[], format: 'openai-chat' | 'gemini'): { plan: CompactionPlan; starts: Adapted['starts'] } {
  const adapted = adaptHistory(items, rulesOf(format))
  if (!('messages' in adapted)) throw new Error('the history did not read')
  return { plan: conversationPlan(adapted.messages), starts: adapted.starts }
}
