import { describe, expect, it } from 'vitest'
import { type Message, emptySections } from '../../../src/compaction/index.js'
import { type CompactDeps, runCompaction } from '../../../src/service/compact.js'
import type { ProxyRequest } from '../../../src/service/proxy/compactor.js'
import type { ConversationState } from '../../../src/service/proxy/conversations.js'
import { WriteAhead } from '../../../src/service/proxy/write-ahead.js'
import { ExtractiveSummarizer } from '../../../src/summarizer/extractive.js'
import type { Summarizer } from '../../../src/summarizer/summarizer.js'
import { assistant, call, result, results, user } from '../../helpers/history.js'

/** A model that answers when it is let (`answer`), counting its calls. */
function slowModel(): Summarizer & { calls: number; answer: () => void } {
  let open: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (open = resolve))
  const model = {
    kind: 'anthropic' as const,
    calls: 0,
    answer: () => open(),
    summarize: async () => {
      model.calls++
      await gate
      return {
        sections: { ...emptySections(), objective: 'Port the exporter (written ahead)' },
        report: { kind: 'anthropic' as const, model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 0 }
      }
    }
  }
  return model
}

/** A conversation of `steps` tool steps of about 1,000 tokens each. */
function history(steps: number): Message[] {
  const messages: Message[] = [user('Port the exporter')]
  for (let i = 0; i < steps; i++) messages.push(assistant(call(`t${i}`, 'bash', { command: `cat e${i}.ts` })), results(result(`t${i}`, 'x'.repeat(4_000))))
  return messages
}

function writeAhead(model: Summarizer, places = 8) {
  const events: string[] = []
  const persisted: ConversationState[] = []
  const deps: CompactDeps = {
    defaults: { budgetTokens: 10_000, keepTurns: 8 },
    extractive: new ExtractiveSummarizer(),
    modelSummarizer: model,
    newId: () => 'cmp_1',
    now: () => performance.now()
  }
  const ahead = new WriteAhead({
    precomputeAt: 0.5,
    canPrecompute: (inFlight) => inFlight < places,
    onPrecompute: (event) => void events.push(event),
    hasModel: true,
    persist: (state) => void persisted.push(state),
    keep: () => 1_000,
    body: (request, input, keep) => ({
      messages: input,
      mode: 'manual',
      budgetTokens: request.budgetTokens,
      summarizer: 'auto',
      ...(keep ? { keepTokens: keep } : {})
    }),
    run: (body, context) => runCompaction(body, deps, context)
  })
  return { ahead, events, persisted }
}

const state = (): ConversationState => ({ key: 'k', loaded: true, seenAt: 0 })
const request = (messages: Message[]): ProxyRequest => ({ messages, keyName: '', session: 's', budgetTokens: 10_000 })

describe('summaries written ahead of the crossing', () => {
  it("reads a conversation's pace: what a request adds and how far apart they come, from again after the history shrank", () => {
    const { ahead } = writeAhead(slowModel())
    const s = state()
    ahead.observe(s, 1_000)
    expect(s.pace).toMatchObject({ tokens: 1_000 })
    expect(s.pace?.growth).toBeUndefined()
    ahead.observe(s, 3_000)
    expect(s.pace?.growth).toBe(2_000)
    ahead.observe(s, 4_000)
    expect(s.pace?.growth).toBe(1_500) // a moving average, the newest weighed half
    ahead.observe(s, 500) // a crossing: the history shrank
    expect(s.pace).toMatchObject({ tokens: 500, growth: 1_500 })
  })

  it('begins only where the crossing is near, one at a time, and keeps what it wrote for the crossing', async () => {
    const model = slowModel()
    const { ahead, events, persisted } = writeAhead(model)
    const s = state()
    // under half the budget: nothing, whatever the pace
    s.pace = { tokens: 4_000, at: 0, growth: 2_000, interval: 20_000 }
    ahead.maybe(s, request(history(4)), 4_000, history(4))
    expect(events).toEqual([])
    // past half, but the growth says the crossing is three requests or more away (a summary is thought to take 10 s, a request 20 s apart)
    s.pace = { tokens: 6_000, at: 0, growth: 1_000, interval: 20_000 }
    ahead.maybe(s, request(history(6)), 6_000, history(6))
    expect(events).toEqual([])
    // near: begun, and not begun again while it is written
    s.pace = { tokens: 8_500, at: 0, growth: 2_000, interval: 20_000 }
    ahead.maybe(s, request(history(8)), 8_500, history(8))
    ahead.maybe(s, request(history(8)), 8_500, history(8))
    expect(events).toEqual(['started'])
    model.answer()
    await Promise.all(ahead.inFlight)
    expect(events).toEqual(['started', 'done'])
    expect(model.calls).toBe(1)
    expect(s.pending?.cut).toBeGreaterThan(0)
    expect(persisted).toContain(s)
  })

  it('is skipped where no summary place is free, and begins nothing once closed', () => {
    const full = writeAhead(slowModel(), 0)
    const s = state()
    s.pace = { tokens: 8_500, at: 0, growth: 2_000, interval: 20_000 }
    full.ahead.maybe(s, request(history(8)), 8_500, history(8))
    expect(full.events).toEqual(['skipped'])
    const closed = writeAhead(slowModel())
    closed.ahead.close()
    // the same near crossing as above: nothing begins
    closed.ahead.maybe(s, request(history(8)), 8_500, history(8))
    expect(closed.events).toEqual([])
  })
})
