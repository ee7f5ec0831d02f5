import { afterEach, describe, expect, it } from 'vitest'
import { RECALL_TOOL_HITS, RECALL_TOOL_MAX_HITS, answerRecall, recallLimit, recallResultText } from '../../src/service/recall.js'
import { SqliteStore } from '../../src/storage/sqlite.js'

const stores: SqliteStore[] = []
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close()
})

describe("the model's recall", () => {
  it('answers with the passages exact, each after a line that cites its kind, compaction, messages and lines; says so when nothing matches', async () => {
    const store = new SqliteStore(':memory:')
    stores.push(store)
    const passage = 'INFO worker 7 ready\nINFO the rollout codename is bluefin-7\nINFO done'
    await store.saveMemory({ compaction_id: 'cmp_a', session_id: 's', key_name: 'k', created_at: '2026-12-01T00:00:00.000Z' }, [
      { kind: 'output', text: passage, from: 2, to: 3, lines: [299, 301] },
      { kind: 'command', text: 'cat deploy.log → ok', from: 2, to: 3 }
    ])
    const text = await answerRecall(store, 'k', 's', 'what is the rollout codename')
    expect(text).toBe(`[1] (output, compaction cmp_a, messages 2-3, lines 299-301)\n${passage}`)
    expect(await answerRecall(store, 'other', 's', 'rollout codename')).toMatch(/^Nothing kept of this session's compacted turns matches "rollout codename"/)
    expect(recallResultText('x', [{ kind: 'ask', text: 'a', compaction_id: 'c', messages: [4, 4], score: 1, created_at: '' }])).toBe(
      '[1] (ask, compaction c, message 4)\na'
    )
  })

  it('takes the limit a call asks for within its bounds, the default for anything else', () => {
    expect([recallLimit(3), recallLimit(0), recallLimit(1_000), recallLimit('7'), recallLimit(2.5), recallLimit(undefined)]).toEqual([
      3,
      1,
      RECALL_TOOL_MAX_HITS,
      RECALL_TOOL_HITS,
      RECALL_TOOL_HITS,
      RECALL_TOOL_HITS
    ])
  })
})
