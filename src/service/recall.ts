import type { RecallHit, Store } from '../storage/store.js'

/**
 * The model's own search of what compaction removed: one query of a session's cold layer, answered as the
 * text a tool result gives the model (the passages exact, each with where it came from). Shared by the
 * proxy's recall tool and the MCP server's.
 */

/** Passages a model's recall call is answered with, unless it asks for fewer or more. */
export const RECALL_TOOL_HITS = 5
/** The most it may ask for. */
export const RECALL_TOOL_MAX_HITS = 20

/** A recall's hits as the text of a tool result: each passage exact, after a line that cites it. */
export function recallResultText(query: string, hits: readonly RecallHit[]): string {
  if (hits.length === 0) return `Nothing kept of this session's compacted turns matches "${query}". Try other words: an error's text, a file name, a value.`
  return hits
    .map((h, k) => {
      const where = [
        h.kind,
        `compaction ${h.compaction_id}`,
        h.messages[0] === h.messages[1] ? `message ${h.messages[0]}` : `messages ${h.messages[0]}-${h.messages[1]}`,
        ...(h.lines ? [h.lines[0] === h.lines[1] ? `line ${h.lines[0]}` : `lines ${h.lines[0]}-${h.lines[1]}`] : [])
      ].join(', ')
      return `[${k + 1}] (${where})\n${h.text}`
    })
    .join('\n\n')
}

/** The limit a call asked for, within bounds. */
export function recallLimit(asked: unknown): number {
  return typeof asked === 'number' && Number.isInteger(asked) ? Math.min(RECALL_TOOL_MAX_HITS, Math.max(1, asked)) : RECALL_TOOL_HITS
}

/** One recall call answered: the session's best passages for `query`, as a tool result's text. */
export async function answerRecall(store: Pick<Store, 'recall'>, keyName: string, session: string, query: string, limit = RECALL_TOOL_HITS): Promise<string> {
  const hits = await store.recall(session, keyName, { text: query, limit })
  return recallResultText(query, hits)
}
