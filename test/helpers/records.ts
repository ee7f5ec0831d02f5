import { emptySections } from '../../src/compaction/index.js'
import type { CompactionRecord } from '../../src/storage/store.js'

/** A compaction's record as the stores keep one: figures of 1, an extractive summary whose text is `summary`. */
export function compactionRecord(id: string, session: string, key: string, at = '2026-11-30T00:00:00.000Z', summary = `summary ${id}`): CompactionRecord {
  return {
    id,
    session_id: session,
    key_name: key,
    created_at: at,
    mode: 'manual',
    reason: 'manual',
    stats: {
      raw_history_tokens: 1,
      summary_tokens: 1,
      compacted_turns: 1,
      compacted_messages: 1,
      kept_messages: 1,
      kept_tokens: 1,
      context_after_compaction: 1,
      clipped_tool_results: 0,
      guard_added: 0,
      estimate_scale: 1,
      carried_context_tokens: 0,
      carried_context_dropped: 0
    },
    summarizer: { kind: 'extractive', model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: 1 },
    doctrine_version: 'v',
    summary: { text: summary, sections: emptySections() }
  }
}
