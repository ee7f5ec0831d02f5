import type { CompactDeps } from '../../../src/service/compact.js'
import fc from 'fast-check'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { type Message, emptySections, promptTokens, validateHistory } from '../../../src/compaction/index.js'
import { ProxyCompactor, type ProxyOutcome } from '../../../src/service/proxy/compactor.js'
import type { AnchorStore, SavedConversation } from '../../../src/service/proxy/conversations.js'
import { checkThinkingPrefix, producedThinking } from '../../helpers/preserved-thinking.js'
import { PROXY_SESSION_IDLE_MS } from '../../../src/contract/defaults.js'
import { ExtractiveSummarizer } from '../../../src/summarizer/extractive.js'
import type { Summarizer } from '../../../src/summarizer/summarizer.js'
import { assistant, call, result, results, user } from '../../helpers/history.js'

/** A model that answers at once: the proxy's background paths run as they would with a real one. */
const model: Summarizer = {
  kind: 'anthropic',
  summarize: async () => ({
    sections: { ...emptySections(), objective: 'Keep the service running' },
    report: { kind: 'anthropic', model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 0 }
  })
}

/** A compactor's deps with the extractive summarizer alone, at `budgetTokens`, its ids numbered. */
function extractiveDeps(budgetTokens: number): CompactDeps {
  let n = 0
  return { defaults: { budgetTokens, keepTurns: 8 }, extractive: new ExtractiveSummarizer(), newId: () => `cmp_${++n}`, now: () => performance.now() }
}

function compactor(withModel: boolean, precomputeAt: number | undefined): ProxyCompactor {
  let n = 0
  return new ProxyCompactor({
    deps: {
      defaults: { budgetTokens: 45_000, keepTurns: 8 },
      extractive: new ExtractiveSummarizer(),
      ...(withModel ? { modelSummarizer: model } : {}),
      newId: () => `cmp_${++n}`,
      now: () => performance.now()
    },
    precomputeAt,
    canPrecompute: () => true,
    onPrecompute: () => undefined
  })
}

/** A turn: a prompt, then tool steps with outputs of the given sizes, then the assistant's answer. */
const turn = fc.record({
  prompt: fc.string({ minLength: 1, maxLength: 200 }),
  outputs: fc.array(fc.integer({ min: 0, max: 6_000 }), { maxLength: 4 }),
  answer: fc.string({ maxLength: 300 })
})

function build(turns: { prompt: string; outputs: number[]; answer: string }[]): Message[][] {
  const requests: Message[][] = []
  const history: Message[] = []
  turns.forEach((t, i) => {
    history.push(user(`${t.prompt} (turn ${i})`))
    t.outputs.forEach((size, j) => {
      const id = `toolu_${i}_${j}`
      history.push(assistant(call(id, 'bash', { command: `cat src/f${i}_${j}.ts` })), results(result(id, 'o'.repeat(size))))
    })
    requests.push([...history]) // the client asks the model with its history so far
    history.push(assistant(t.answer || 'ok'))
  })
  return requests
}

describe('the share of the budget under which a request is forwarded unread', () => {
  it('is the whole budget where nothing can be written ahead and the request names its session; else where summaries ahead begin to be paced', () => {
    // no model of the gateway's or the client's, or summaries ahead off: nothing below the budget is needed
    expect(compactor(false, 0.75).quietShare(false, true)).toBe(1)
    expect(compactor(true, undefined).quietShare(false, true)).toBe(1)
    // a model to write ahead with (the gateway's, or the client's): from precomputeAt (the lower of it and a target share)
    expect(compactor(true, 0.75).quietShare(false, true)).toBe(0.75)
    expect(compactor(false, 0.4).quietShare(true, true)).toBe(0.4)
    // a request that names no session is read from there all the same: its session is read from its history
    expect(compactor(false, 0.75).quietShare(false, false)).toBe(0.75)
  })
})

describe('the proxy compactor over a growing session', () => {
  it("forwards a valid history, within the budget whenever it changed it, ending in the client's own newest turns", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(turn, { minLength: 2, maxLength: 40 }),
        fc.integer({ min: 4_000, max: 20_000 }),
        fc.constantFrom<[boolean, number | undefined]>([false, undefined], [true, undefined], [true, 0.75], [true, 0.5]),
        fc.boolean(),
        async (turns, budget, [withModel, precomputeAt], settle) => {
          const proxy = compactor(withModel, precomputeAt)
          let lastSummary: string | undefined
          for (const messages of build(turns)) {
            const outcome: ProxyOutcome = await proxy.prepare({ messages, keyName: 't', session: 's', budgetTokens: budget })
            if (settle) await proxy.idle()
            if (outcome.kind === 'none') {
              expect(outcome.tokens).toBe(promptTokens(messages, undefined, undefined))
              continue
            }
            const sent = outcome.messages
            expect(validateHistory(sent)).toBeUndefined()
            expect(promptTokens(sent, undefined, undefined)).toBeLessThanOrEqual(budget)
            // Everything after the summary turn is the client's own newest messages, as sent (or, where the
            // newest step alone was over the tail's bound, clipped and the clips reported).
            const clipped = outcome.clips.length > 0
            if (!clipped) expect(sent.slice(1)).toEqual(messages.slice(messages.length - sent.length + 1))
            else expect(sent.length).toBeLessThanOrEqual(messages.length)
            // A reused summary is the one the last compaction made: the prefix holds between compactions. Or,
            // once that one no longer fits, the model's rewrite of the same cut (only a model writes one).
            if (outcome.kind === 'reused' && outcome.summaryId !== lastSummary) expect(withModel && precomputeAt !== undefined).toBe(true)
            lastSummary = outcome.summaryId
          }
          await proxy.close()
        }
      ),
      { numRuns: 60 }
    )
  }, 180_000)

  it('never waits for a model at a crossing: a summary that comes after its crossing is the base of the next one', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let calls = 0
    const slow: Summarizer = {
      kind: 'anthropic',
      summarize: async () => {
        calls++
        await gate
        return {
          sections: { ...emptySections(), objective: 'Keep the service running (model)' },
          report: { kind: 'anthropic', model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 0 }
        }
      }
    }
    let n = 0
    const proxy = new ProxyCompactor({
      deps: {
        defaults: { budgetTokens: 45_000, keepTurns: 8 },
        extractive: new ExtractiveSummarizer(),
        modelSummarizer: slow,
        newId: () => `cmp_${++n}`,
        now: () => performance.now()
      },
      precomputeAt: 0.5,
      canPrecompute: () => true,
      onPrecompute: () => undefined,
      targetShare: 0.5
    })
    const requests = build(Array.from({ length: 60 }, (_, i) => ({ prompt: `step ${i}`, outputs: [1_500], answer: 'ok' })))
    const outcomes: ProxyOutcome[] = []
    let k = 0
    // every request is answered while the model has answered nothing
    while (outcomes.filter((o) => o.kind === 'compacted').length < 2)
      outcomes.push(await proxy.prepare({ messages: requests[k++]!, keyName: 't', session: 's', budgetTokens: 6_000 }))
    expect(calls).toBe(1)
    expect(outcomes.every((o) => o.kind !== 'compacted' || o.source === 'merged')).toBe(true)
    release()
    await proxy.idle()
    let next: ProxyOutcome | undefined
    while (next?.kind !== 'compacted' && k < requests.length)
      next = await proxy.prepare({ messages: requests[k++]!, keyName: 't', session: 's', budgetTokens: 6_000 })
    expect(next?.kind).toBe('compacted')
    if (next?.kind !== 'compacted') return
    expect(JSON.stringify(next.messages[0])).toContain('Keep the service running (model)')
    expect(validateHistory(next.messages)).toBeUndefined()
    expect(promptTokens(next.messages, undefined, undefined)).toBeLessThanOrEqual(6_000)
    await proxy.close()
  })

  it('keeps the newest tool output whole when the budget holds it beside the summary, whatever the target share', async () => {
    // The crossing lands at half the room; the output the model just asked for is more than that share, not more than the budget.
    const proxy = new ProxyCompactor({
      deps: extractiveDeps(37_000),
      precomputeAt: undefined,
      canPrecompute: () => true,
      onPrecompute: () => undefined,
      targetShare: 0.5
    })
    const history: Message[] = [user('Audit the parser')]
    for (let i = 0; i < 20; i++)
      history.push(
        assistant(call(`t${i}`, 'bash', { command: `cat src/m${i}.ts` })),
        results(result(`t${i}`, `m${i} `.repeat(2_000))),
        assistant('next'),
        user(`go on ${i}`)
      )
    history.push(assistant(call('big', 'Read', { file_path: 'src/parser.ts' })), results(result('big', `line ${'p'.repeat(60)}\n`.repeat(424))))
    const newest = JSON.stringify(history.at(-1))
    expect(newest.length).toBeGreaterThan(28_000)
    // an agent's system prompt and tools take 16,000 tokens of it
    const system = `You are a coding agent. ${'Follow the rules. '.repeat(3_550)}`
    const outcome = await proxy.prepare({ messages: history, system, keyName: 't', session: 's', budgetTokens: 37_000 })
    expect(outcome.kind).toBe('compacted')
    if (outcome.kind !== 'compacted') return
    expect(outcome.clips).toEqual([])
    expect(JSON.stringify(outcome.messages.at(-1))).toBe(newest)
    expect(promptTokens(outcome.messages, system, undefined)).toBeLessThanOrEqual(37_000)
    await proxy.close()
  })

  it('clips the newest output only as far as the budget requires, and repeats that clip byte for byte until the next compaction', async () => {
    const proxy = compactor(false, undefined)
    const history: Message[] = [user('Audit the parser')]
    for (let i = 0; i < 6; i++)
      history.push(assistant(call(`t${i}`, 'bash', { command: `cat src/m${i}.ts` })), results(result(`t${i}`, `m${i} `.repeat(1_000))))
    // an output over the whole budget on its own, with astral characters where a clip may fall
    history.push(assistant(call('huge', 'bash', { command: 'cat dump.log' })), results(result('huge', '😀 log line\n'.repeat(4_000))))
    const first = await proxy.prepare({ messages: history, keyName: 't', session: 's', budgetTokens: 10_000 })
    expect(first.kind).toBe('compacted')
    if (first.kind !== 'compacted') return
    expect(first.clips).toHaveLength(1)
    const sentTokens = promptTokens(first.messages, undefined, undefined)
    expect(sentTokens).toBeLessThanOrEqual(10_000)
    // it takes what the summary leaves: the clipped output fills the budget to within a few percent
    expect(sentTokens).toBeGreaterThan(9_000)
    expect(JSON.stringify(first.messages)).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/)
    // the client sends the output whole again, and a new turn: the same clipped bytes go on, the clip reported
    const next = [...history, assistant('It is a log of the parser.'), user('Summarize the errors in it')]
    const again = await proxy.prepare({ messages: next, keyName: 't', session: 's', budgetTokens: 12_000 })
    expect(again.kind).toBe('reused')
    if (again.kind !== 'reused') return
    expect(JSON.stringify(again.messages.slice(0, first.messages.length))).toBe(JSON.stringify(first.messages))
    expect(again.clips).toEqual(first.clips)
    // a client that changes that message gets its own message, not the clip
    const edited = next.map((m, i) => (i === next.length - 3 ? results(result('huge', 'rewritten by the client')) : m))
    const own = await proxy.prepare({ messages: edited, keyName: 't', session: 's', budgetTokens: 12_000 })
    expect(own.kind).toBe('reused')
    if (own.kind === 'reused') expect(own.clips).toEqual([])
    await proxy.close()
  })

  it("forwards a client's own compaction request as sent, and writes nothing ahead for a client that compacts by itself", async () => {
    let calls = 0
    const counting: Summarizer = { kind: 'anthropic', summarize: async (r) => (calls++, model.summarize(r)) }
    let n = 0
    const proxy = new ProxyCompactor({
      deps: {
        defaults: { budgetTokens: 45_000, keepTurns: 8 },
        extractive: new ExtractiveSummarizer(),
        modelSummarizer: counting,
        newId: () => `cmp_${++n}`,
        now: () => performance.now()
      },
      precomputeAt: 0.1,
      canPrecompute: () => true,
      onPrecompute: () => undefined
    })
    // the provider's compaction item opens the history (the Responses API's, as the formats read it)
    const requests = build(Array.from({ length: 30 }, (_, i) => ({ prompt: `step ${i}`, outputs: [1_500], answer: 'ok' }))).map((m): Message[] => [
      {
        role: 'user',
        content: [
          { type: 'client_item', item_type: 'compaction' },
          { type: 'text', text: 'go' }
        ]
      },
      assistant('ok'),
      ...m
    ])
    for (const messages of requests) {
      const outcome = await proxy.prepare({ messages, keyName: 't', session: 's', budgetTokens: 8_000 })
      await proxy.idle()
      if (outcome.kind === 'compacted') expect(outcome.source).toBe('merged')
    }
    expect(calls).toBe(0)
    // a request whose newest item asks the provider to compact is forwarded as it came, over the budget too
    const last = requests.at(-1)!
    const trigger: Message[] = [...last, assistant('ok'), { role: 'user', content: [{ type: 'client_item', item_type: 'compaction_trigger' }] }]
    expect((await proxy.prepare({ messages: trigger, keyName: 't', session: 's', budgetTokens: 8_000 })).kind).toBe('none')
    await proxy.close()
  })

  it('lands each crossing at the target share of the room, with the room the summary really takes reserved for it', async () => {
    let n = 0
    const proxy = new ProxyCompactor({
      deps: {
        defaults: { budgetTokens: 20_000, keepTurns: 100 },
        extractive: new ExtractiveSummarizer(),
        newId: () => `cmp_${++n}`,
        now: () => performance.now()
      },
      precomputeAt: undefined,
      canPrecompute: () => true,
      onPrecompute: () => undefined,
      targetShare: 0.5
    })
    const landed: number[] = []
    for (const messages of build(Array.from({ length: 120 }, (_, i) => ({ prompt: `step ${i}`, outputs: [3_000], answer: 'ok' })))) {
      const outcome = await proxy.prepare({ messages, keyName: 't', session: 's', budgetTokens: 20_000 })
      if (outcome.kind === 'compacted') landed.push(outcome.tokens)
    }
    expect(landed.length).toBeGreaterThanOrEqual(3)
    // after the first crossing (no summary yet to measure), each lands within a few steps of half the room
    for (const tokens of landed.slice(1)) {
      expect(tokens).toBeGreaterThan(0.45 * 20_000)
      expect(tokens).toBeLessThanOrEqual(0.6 * 20_000)
    }
    await proxy.close()
  })

  it('starts over when the client sends another history under the same session', async () => {
    const proxy = compactor(false, undefined)
    const long = build([
      { prompt: 'first task', outputs: [20_000, 20_000, 20_000], answer: 'done' },
      { prompt: 'next', outputs: [100], answer: '' }
    ]).at(-1)!
    const first = await proxy.prepare({ messages: long, keyName: 't', session: 's', budgetTokens: 10_000 })
    expect(first.kind).toBe('compacted')
    const other = [user('an unrelated question')]
    expect((await proxy.prepare({ messages: other, keyName: 't', session: 's', budgetTokens: 10_000 })).kind).toBe('none')
  })

  it('never shares a session across tenants', async () => {
    const proxy = compactor(false, undefined)
    const long = build([
      { prompt: 'first task', outputs: [20_000, 20_000, 20_000], answer: 'done' },
      { prompt: 'next', outputs: [100], answer: '' }
    ]).at(-1)!
    expect((await proxy.prepare({ messages: long, keyName: 'a', session: 's', budgetTokens: 10_000 })).kind).toBe('compacted')
    const again = await proxy.prepare({ messages: long, keyName: 'b', session: 's', budgetTokens: 10_000 })
    expect(again.kind).toBe('compacted')
  })

  afterEach(() => vi.useRealTimers())

  it('forgets a session idle for longer than an hour, and the least recently used past the count', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const long = build([
      { prompt: 'first task', outputs: [20_000, 20_000, 20_000], answer: 'done' },
      { prompt: 'next', outputs: [100], answer: '' }
    ]).at(-1)!
    const proxy = compactor(false, undefined)
    const first = await proxy.prepare({ messages: long, keyName: 't', session: 'idle', budgetTokens: 10_000 })
    expect((await proxy.prepare({ messages: long, keyName: 't', session: 'idle', budgetTokens: 10_000 })).kind).toBe('reused')
    vi.setSystemTime(Date.now() + PROXY_SESSION_IDLE_MS + 1)
    await proxy.prepare({ messages: [user('another session')], keyName: 't', session: 'other', budgetTokens: 10_000 })
    expect(proxy.size).toBe(1)
    const later = await proxy.prepare({ messages: long, keyName: 't', session: 'idle', budgetTokens: 10_000 })
    expect(later.kind).toBe('compacted')
    expect(later.kind === 'compacted' && first.kind === 'compacted' && later.summaryId !== first.summaryId).toBe(true)

    const small = new ProxyCompactor({
      deps: { defaults: { budgetTokens: 45_000, keepTurns: 8 }, extractive: new ExtractiveSummarizer(), newId: () => 'x', now: () => 0 },
      precomputeAt: undefined,
      canPrecompute: () => true,
      onPrecompute: () => undefined,
      maxSessions: 3
    })
    for (const session of ['a', 'b', 'c', 'd', 'e']) await small.prepare({ messages: [user(session)], keyName: 't', session, budgetTokens: 10_000 })
    expect(small.size).toBe(3)
  })
})

describe('thinking bound to its prefix, across a restart', () => {
  it('takes an anchor saved before its bound was kept (an earlier build) as staling every kept turn sent so far: every request accepted', async () => {
    const saved = new Map<string, SavedConversation>()
    const anchors: AnchorStore = {
      shared: false,
      load: async (key) => saved.get(key),
      save: async (key, value) => void saved.set(key, JSON.parse(JSON.stringify(value)) as SavedConversation)
    }
    const make = (): ProxyCompactor =>
      new ProxyCompactor({
        deps: {
          defaults: { budgetTokens: 45_000, keepTurns: 8 },
          extractive: new ExtractiveSummarizer(),
          newId: () => `cmp_${Math.random()}`,
          now: () => performance.now()
        },
        precomputeAt: undefined,
        canPrecompute: () => true,
        onPrecompute: () => undefined,
        anchors
      })
    let proxy = make()
    const client: Message[] = [user('Fix the failing parser test in src/parse.ts')]
    let crossings = 0
    for (let step = 0; step < 40; step++) {
      const outcome = await proxy.prepare({ messages: [...client], keyName: '', session: 's-restart', budgetTokens: 6_000, unbindThinking: true })
      if (outcome.kind === 'compacted') crossings++
      const forwarded = outcome.kind === 'none' ? client : outcome.messages
      const body = { model: 'claude-opus-5-5', thinking: { type: 'adaptive' }, messages: forwarded }
      expect(checkThinkingPrefix(body).refusal, `step ${step}`).toBeUndefined()
      const id = `toolu_r_${step}`
      client.push(assistant(producedThinking(body), call(id, 'bash', { command: `cat src/m${step}.ts` })), results(result(id, `m${step} `.repeat(300))))
      if (crossings === 1 && step % 10 === 9) {
        // the process restarts, and what it finds was saved by a build that kept no bound
        for (const value of saved.values()) for (const anchor of [value.current, value.refined, value.pending]) if (anchor) delete anchor.bound
        proxy = make()
      }
    }
    expect(crossings).toBeGreaterThanOrEqual(2)
  })
})

describe('a crossing timed by the prompt cache', () => {
  /** A conversation of `steps` tool steps of 4,000 characters, then a new prompt. */
  const session = (steps: number): Message[] => {
    const history: Message[] = [user('Refactor the importer')]
    for (let i = 0; i < steps; i++)
      history.push(assistant(call(`toolu_${i}`, 'bash', { command: `cat f${i}.ts` })), results(result(`toolu_${i}`, 'o'.repeat(4_000))))
    history.push(assistant('Done.'), user('Now the exporter'))
    return history
  }
  const withClock = (promptCacheMs: number | undefined, shared = false): { proxy: ProxyCompactor; at: (ms: number) => void } => {
    let now = 1_000_000
    const saved = new Map<string, SavedConversation>()
    const anchors: AnchorStore = {
      shared,
      load: async (key) => saved.get(key),
      save: async (key, value) => void saved.set(key, value)
    }
    const proxy = new ProxyCompactor({
      deps: extractiveDeps(45_000),
      precomputeAt: undefined,
      canPrecompute: () => true,
      onPrecompute: () => undefined,
      targetShare: 0.5,
      ...(promptCacheMs !== undefined ? { promptCacheMs } : {}),
      clock: () => now,
      anchors
    })
    return { proxy, at: (ms) => (now = ms) }
  }
  const ask = (proxy: ProxyCompactor, messages: Message[]): Promise<ProxyOutcome> =>
    proxy.prepare({ messages, keyName: 'k', session: 's', budgetTokens: 10_000 })

  it('compacts a conversation past 60% of its budget that comes back after the cache lapsed, recorded as such; not one back in time, nor one under that share', async () => {
    const { proxy, at } = withClock(300_000)
    const grown = session(7) // about 7,000 tokens of a budget of 10,000
    expect(promptTokens(grown, undefined, undefined)).toBeGreaterThan(6_000)
    expect(promptTokens(grown, undefined, undefined)).toBeLessThan(10_000)
    at(1_000_000)
    expect((await ask(proxy, grown)).kind).toBe('none')
    at(1_000_000 + 60_000) // a minute later: the cache holds
    expect((await ask(proxy, grown)).kind).toBe('none')
    at(1_000_000 + 60_000 + 301_000) // past the cache's five minutes
    const lapsed = await ask(proxy, grown)
    expect(lapsed.kind).toBe('compacted')
    if (lapsed.kind !== 'compacted') return
    expect(lapsed.run.response.reason).toBe('cache_lapsed')
    expect(lapsed.tokens).toBeLessThan(promptTokens(grown, undefined, undefined))
    expect(validateHistory(lapsed.messages)).toBeUndefined()
    // a small conversation after the same pause is left alone
    const small = withClock(300_000)
    small.at(0)
    expect((await ask(small.proxy, session(3))).kind).toBe('none')
    small.at(400_000)
    expect((await ask(small.proxy, session(3))).kind).toBe('none')
  })

  it('is not used where it is off, nor where replicas share the anchors (another may have kept the cache warm)', async () => {
    for (const { proxy, at } of [withClock(undefined), withClock(300_000, true)]) {
      at(0)
      expect((await ask(proxy, session(7))).kind).toBe('none')
      at(400_000)
      expect((await ask(proxy, session(7))).kind).toBe('none')
    }
  })
})

describe('a crossing that pays back (a budget that is a target under COMPACT_LIMIT)', () => {
  /** A conversation of `steps` tool steps of 8,000 characters (about 2,000 tokens each), then a new prompt. */
  const session = (steps: number): Message[] => {
    const history: Message[] = [user('Port the exporter')]
    for (let i = 0; i < steps; i++)
      history.push(assistant(call(`toolu_p${i}`, 'bash', { command: `cat e${i}.ts` })), results(result(`toolu_p${i}`, `e${i} `.repeat(2_000))))
    history.push(assistant('Done.'), user('Go on'))
    return history
  }
  const make = (waits: { n: number }): ProxyCompactor =>
    new ProxyCompactor({
      deps: extractiveDeps(45_000),
      precomputeAt: undefined,
      canPrecompute: () => true,
      onPrecompute: () => undefined,
      targetShare: 0.5,
      onWait: () => void waits.n++
    })

  it('forwards a young conversation over its budget uncompacted, then compacts once it pays back, saying how many requests it waited', async () => {
    const waits = { n: 0 }
    const proxy = make(waits)
    const outcomes: ProxyOutcome[] = []
    // the budget crossed at about the 5th step; a crossing then would not pay back in so short a conversation
    for (let steps = 1; steps <= 30; steps++) {
      const messages = session(steps)
      const outcome = await proxy.prepare({ messages, keyName: 'k', session: 'pays', budgetTokens: 10_000, limitTokens: 200_000 })
      outcomes.push(outcome)
      if (outcome.kind === 'compacted') break
    }
    const first = outcomes.findIndex((o) => o.kind !== 'none' || (o.tokens ?? 0) > 10_000)
    const compacted = outcomes.at(-1)!
    expect(compacted.kind).toBe('compacted')
    if (compacted.kind !== 'compacted') return
    // it waited over the budget: each of those requests forwarded as it came, and counted
    const waited = outcomes.length - 1 - first
    expect(waited).toBeGreaterThan(0)
    expect(waits.n).toBe(waited)
    expect(outcomes.slice(first, -1).every((o) => o.kind === 'none' && (o.tokens ?? 0) > 10_000)).toBe(true)
    expect(compacted.timing).toEqual({ because: 'pays_back', waited_requests: waited, limit_tokens: 200_000 })
    // the compaction itself lands in the budget as any other
    expect(compacted.tokens).toBeLessThanOrEqual(10_000)
    expect(validateHistory(compacted.messages)).toBeUndefined()
  })

  it('never forwards a prompt over the limit: past it, the crossing is made whatever the pace', async () => {
    const proxy = make({ n: 0 })
    const messages = session(8) // about 16,000 tokens: over a limit of 12,000
    expect(promptTokens(messages, undefined, undefined)).toBeGreaterThan(12_000)
    const outcome = await proxy.prepare({ messages, keyName: 'k', session: 'limit', budgetTokens: 10_000, limitTokens: 12_000 })
    expect(outcome.kind).toBe('compacted')
    if (outcome.kind === 'compacted') expect(outcome.timing).toEqual({ because: 'over_limit', waited_requests: 0, limit_tokens: 12_000 })
  })

  it('crosses at the budget as before without a limit (and says nothing of timing)', async () => {
    const proxy = make({ n: 0 })
    const outcome = await proxy.prepare({ messages: session(8), keyName: 'k', session: 'none', budgetTokens: 10_000 })
    expect(outcome.kind).toBe('compacted')
    if (outcome.kind === 'compacted') expect(outcome.timing).toBeUndefined()
  })
})
