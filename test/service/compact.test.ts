import { describe, expect, it } from 'vitest'
import { type CompactDeps, type CompactionInput, runCompaction, summarized } from '../../src/service/compact.js'
import { InvalidHistoryError, SummarizerUnavailableError } from '../../src/service/errors.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import type { Summarizer } from '../../src/summarizer/summarizer.js'
import { type Message, emptySections } from '../../src/compaction/index.js'
import { shellStep, user } from '../helpers/history.js'

const history = [
  user('Fix the flaky retry test'),
  ...Array.from({ length: 30 }, (_, i) => shellStep(`t${i}`, `npm test -- retry ${i}`, `run ${i}\n${'o'.repeat(600)}`)).flat()
]
let ids = 0
const deps = (more: Partial<CompactDeps> = {}): CompactDeps => ({
  defaults: { budgetTokens: 2_000, keepTurns: 4 },
  extractive: new ExtractiveSummarizer(),
  newId: () => `cmp_${++ids}`,
  now: () => performance.now(),
  ...more
})
const body = (more: Partial<CompactionInput> = {}): CompactionInput => ({ messages: history, ...more })

describe('runCompaction', () => {
  it('does not compact a history under its budget, and says why', async () => {
    const run = await runCompaction(body({ budgetTokens: 1_000_000 }), deps())
    expect(run.response).toMatchObject({ compacted: false, reason: 'under_budget' })
    expect(run.timings.summarize).toBe(0)
    expect(run.memory).toBeUndefined()
  })

  it('compacts with the extractive summary without a model, and says that no key was the reason', async () => {
    const run = await runCompaction(body(), deps())
    if (!summarized(run.response)) throw new Error('not summarized')
    expect(run.response.reason).toBe('over_budget')
    expect(run.response.summary.id).toMatch(/^cmp_\d+$/)
    expect(run.response.summarizer).toMatchObject({ kind: 'extractive', fallback_reason: 'no_api_key' })
    expect(run.response.doctrine_version).toMatch(/^\d{4}-/)
  })

  it('says no fallback where the operator chose the extractive summarizer', async () => {
    const run = await runCompaction(body(), deps({ defaults: { budgetTokens: 2_000, keepTurns: 4, extractiveChosen: true } }))
    if (!summarized(run.response)) throw new Error('not summarized')
    expect(run.response.summarizer).toMatchObject({ kind: 'extractive', fallback_reason: null })
  })

  it('asks the model when there is one, and the extractive summarizer when the request says so', async () => {
    const calls: string[] = []
    const model: Summarizer = {
      kind: 'anthropic',
      summarize: async () => {
        calls.push('model')
        return {
          sections: { ...emptySections(), objective: 'from the model' },
          report: { kind: 'anthropic', model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 0 }
        }
      }
    }
    const withModel = await runCompaction(body(), deps({ modelSummarizer: model }))
    expect(summarized(withModel.response) && withModel.response.summary.sections.objective).toBe('from the model')
    const extractive = await runCompaction(body({ summarizer: 'extractive' }), deps({ modelSummarizer: model }))
    expect(extractive.response.summarizer?.kind).toBe('extractive')
    expect(extractive.response.summarizer?.fallback_reason).toBeNull()
    expect(calls).toEqual(['model'])
  })

  it('refuses a summarizer the server lacks, and a broken history, naming the place', async () => {
    await expect(runCompaction(body({ summarizer: 'anthropic' }), deps())).rejects.toBeInstanceOf(SummarizerUnavailableError)
    const broken = [user('a'), user('b')]
    const err = await runCompaction(body({ messages: broken }), deps()).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InvalidHistoryError)
    expect((err as InvalidHistoryError).path).toMatch(/^\/messages\/1/)
  })

  it('keeps the cold layer only for a session, and only where the server keeps one', async () => {
    expect((await runCompaction(body({ sessionId: 's1' }), deps())).memory).toBeUndefined()
    expect((await runCompaction(body(), deps({ coldLayer: true }))).memory).toBeUndefined()
    const kept = await runCompaction(body({ sessionId: 's1' }), deps({ coldLayer: true }))
    expect(kept.memory?.length).toBeGreaterThan(0)
    expect(kept.response.compacted && kept.response.messages[0]?.content).toEqual(
      expect.arrayContaining([expect.objectContaining({ text: expect.stringContaining('recall') })])
    )
  })
})

describe('strategy clear and hybrid on /v1/compact (the service)', () => {
  const stepMessages = (steps: number) => {
    const messages: Message[] = [{ role: 'user', content: 'Make the tests pass' }]
    for (let i = 0; i < steps; i++) {
      messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: `toolu_s${i}`, name: 'bash', input: { command: `npm test -- ${i}` } }] })
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_s${i}`, content: `run ${i}\n${'z'.repeat(8_000)}` }] })
    }
    messages.push({ role: 'assistant', content: [{ type: 'text', text: 'Done looking.' }] }, { role: 'user', content: 'Go on' })
    return messages
  }

  it('clears the old tool results where that brings the history to its target, and reports each; summarizes where it does not', async () => {
    const messages = stepMessages(10)
    const cleared = await runCompaction({ messages, budgetTokens: 15_000, strategy: 'hybrid' }, deps())
    const r = cleared.response
    expect(r).toMatchObject({ compacted: true, reason: 'cleared', kept_from: 0, clips: [] })
    if (!r.compacted || summarized(r)) throw new Error('not cleared')
    expect(r.messages).toHaveLength(messages.length)
    expect(r.stats.context_after_compaction).toBeLessThanOrEqual(7_500)
    // only the results it reports changed, every other message as sent
    const changed = new Set(r.cleared.map((c) => c.message))
    r.messages.forEach((m, i) => (changed.has(i) ? expect(m).not.toEqual(messages[i]) : expect(m).toEqual(messages[i])))
    expect(r.cleared.map((c) => c.tool_use_id)).not.toContain('toolu_s9')
    // under the budget: nothing to do, as with summarize
    expect((await runCompaction({ messages: stepMessages(1), budgetTokens: 15_000, strategy: 'hybrid' }, deps())).response.reason).toBe('under_budget')
    // prose, not tool output: clearing cannot reach the target, a summary is made
    const talk: Message[] = [
      { role: 'user', content: `Context: ${'words '.repeat(12_000)}` },
      { role: 'assistant', content: 'Understood.' },
      { role: 'user', content: 'Go on' }
    ]
    const summarizedRun = await runCompaction({ messages: talk, budgetTokens: 15_000, strategy: 'hybrid', mode: 'manual' }, deps())
    expect(summarized(summarizedRun.response)).toBe(true)
    // another format: a 400 naming the field
    await expect(runCompaction({ messages: [{ role: 'user', content: 'hi' }], format: 'openai-chat', strategy: 'clear' }, deps())).rejects.toMatchObject({
      options: { path: '/strategy' }
    })
  })
})
