import { afterAll, describe, expect, it } from 'vitest'
import { type Message, emptySections } from '../../src/compaction/index.js'
import { ProxyCompactor, type ProxyOutcome } from '../../src/service/proxy/compactor.js'
import { storedAnchors } from '../../src/service/proxy/conversations.js'
import { PostgresStore } from '../../src/storage/postgres.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import type { Store } from '../../src/storage/store.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import type { Summarizer } from '../../src/summarizer/summarizer.js'
import { assistant, call, result, results, user } from '../helpers/history.js'
import { tempDb } from '../helpers/process.js'
import { dropSchemas, freshPgUrl, pgMissing } from '../helpers/services.js'

const BUDGET = 8_000

/** A model that counts its calls: a restart or a replica that reuses a summary makes none. */
function countingModel(): Summarizer & { calls: number } {
  const m = {
    kind: 'anthropic' as const,
    calls: 0,
    summarize: async () => {
      m.calls++
      return {
        sections: { ...emptySections(), objective: `Ship the parser (summary ${m.calls})` },
        report: { kind: 'anthropic' as const, model: 'm', input_tokens: 1, output_tokens: 1, calls: 1, fallback_reason: null, duration_ms: 0 }
      }
    }
  }
  return m
}

function proxyOn(store: Store | undefined, model: Summarizer): ProxyCompactor {
  let n = 0
  const prefix = Math.random().toString(36).slice(2, 8)
  return new ProxyCompactor({
    deps: {
      defaults: { budgetTokens: BUDGET, keepTurns: 8 },
      extractive: new ExtractiveSummarizer(),
      modelSummarizer: model,
      newId: () => `cmp_${prefix}_${++n}`,
      now: () => performance.now()
    },
    precomputeAt: undefined,
    canPrecompute: () => true,
    onPrecompute: () => undefined,
    ...(store ? { anchors: storedAnchors(store) } : {})
  })
}

/** A conversation opened by `task`, grown by `steps` tool steps of 1,500 characters each. */
function conversation(task: string, steps: number, output = (i: number) => `output ${i}: ${'o'.repeat(1_500)}`): Message[] {
  const out: Message[] = [user(task)]
  for (let i = 0; i < steps; i++)
    out.push(assistant(call(`${task.slice(0, 4)}_${i}`, 'bash', { command: `cat src/f${i}.ts` })), results(result(`${task.slice(0, 4)}_${i}`, output(i))))
  return out
}

const sent = (o: ProxyOutcome): Message[] | undefined => (o.kind === 'none' ? undefined : o.messages)
const summaryOf = (o: ProxyOutcome): string | undefined => (o.kind === 'none' ? undefined : o.summaryId)

/** A session's first conversation, compacted once by a proxy of its own. */
async function compactedOnce(session: string) {
  const model = countingModel()
  const proxy = proxyOn(undefined, model)
  const history = conversation('Port the parser to the new grammar', 30)
  const first = await proxy.prepare({ messages: history, keyName: 't', session, budgetTokens: BUDGET })
  expect(first.kind).toBe('compacted')
  return { model, proxy, history, first }
}

describe('conversations told apart within a session', () => {
  it("keeps the parent's summary and prefix through any number of interleaved subagent requests", async () => {
    const { model, proxy, history: parent, first } = await compactedOnce('cc-1')
    const calls = model.calls
    for (let k = 0; k < 5; k++) {
      const sub = conversation(`Subagent ${k}: find every caller of parse()`, 30)
      expect((await proxy.prepare({ messages: sub, keyName: 't', session: 'cc-1', budgetTokens: BUDGET })).kind).toBe('compacted')
    }
    const next = [...parent, assistant('Found them.'), user('go on')]
    const again = await proxy.prepare({ messages: next, keyName: 't', session: 'cc-1', budgetTokens: BUDGET })
    expect(again.kind).toBe('reused')
    expect(summaryOf(again)).toBe(summaryOf(first))
    expect(JSON.stringify(sent(again)![0])).toBe(JSON.stringify(sent(first)![0]))
    expect(model.calls).toBe(calls) // every crossing merged from the ledger: no model call waited for, none more for the parent
  })

  it('keeps its summary when the client rewrites old tool output in place (pruning), and drops it for another conversation', async () => {
    const { proxy, first } = await compactedOnce('oc-1')
    const pruned = conversation('Port the parser to the new grammar', 30, (i) =>
      i < 20 ? '[Old tool result content cleared]' : `output ${i}: ${'o'.repeat(1_500)}`
    )
    const again = await proxy.prepare({ messages: [...pruned, assistant('ok'), user('next')], keyName: 't', session: 'oc-1', budgetTokens: BUDGET })
    expect(summaryOf(again)).toBe(summaryOf(first))
    const other = await proxy.prepare({ messages: conversation('Write the release notes for 2.0', 30), keyName: 't', session: 'oc-1', budgetTokens: BUDGET })
    expect(other.kind).toBe('compacted')
    expect(summaryOf(other)).not.toBe(summaryOf(first))
  })
})

describe('anchors kept in the store: a restart, or another replica, reuses the same summary turn with no model call', () => {
  const backends: { name: string; missing: string | undefined; open: () => { a: Store; b: Store } }[] = [
    {
      name: 'SQLite (a restart on the same file)',
      missing: undefined,
      open: () => {
        const path = tempDb()
        return { a: new SqliteStore(path), b: new SqliteStore(path) }
      }
    },
    {
      name: 'PostgreSQL (two replicas)',
      missing: pgMissing,
      open: () => {
        const url = freshPgUrl()
        return { a: new PostgresStore(url), b: new PostgresStore(url) }
      }
    }
  ]
  afterAll(async () => {
    if (!pgMissing) await dropSchemas()
  })

  for (const backend of backends) {
    it.skipIf(backend.missing !== undefined)(`${backend.name}${backend.missing ? ` (skipped: ${backend.missing})` : ''}`, async () => {
      const { a, b } = backend.open()
      const model = countingModel()
      const one = proxyOn(a, model)
      const history = conversation('Port the parser to the new grammar', 30)
      const first = await one.prepare({ messages: history, keyName: 't', session: 's-1', budgetTokens: BUDGET })
      expect(first.kind).toBe('compacted')
      await one.close() // the process goes away once its writes are done
      await a.close()
      const calls = model.calls

      const two = proxyOn(b, model)
      const next = [...history, assistant('Read them.'), user('now fix the grammar')]
      const again = await two.prepare({ messages: next, keyName: 't', session: 's-1', budgetTokens: BUDGET })
      expect(again.kind).toBe('reused')
      expect(summaryOf(again)).toBe(summaryOf(first))
      // the same summary turn, byte for byte: the cached prefix holds across the restart
      expect(JSON.stringify(sent(again)![0])).toBe(JSON.stringify(sent(first)![0]))
      expect(model.calls).toBe(calls)
      // another tenant's conversation of the same session and history is not this one
      const other = await two.prepare({ messages: next, keyName: 'u', session: 's-1', budgetTokens: BUDGET })
      expect(summaryOf(other)).not.toBe(summaryOf(first))
      await two.close()
      await b.close()
    })
  }
})

describe("a deleted session's conversations", () => {
  afterAll(async () => {
    if (!pgMissing) await dropSchemas()
  })

  it('are forgotten here, and not found again in the store: the next request compacts anew', async () => {
    const store = new SqliteStore(tempDb())
    const model = countingModel()
    const proxy = proxyOn(store, model)
    const history = conversation('Port the parser to the new grammar', 30)
    const first = await proxy.prepare({ messages: history, keyName: 't', session: 's-del', budgetTokens: BUDGET })
    await proxy.prepare({ messages: history, keyName: 't', session: 'other', budgetTokens: BUDGET })
    expect(await proxy.forget('t', 's-del')).toBe(1)
    expect((await store.deleteSession('s-del', 't')).cached).toBe(1) // its anchors, saved before forget resolved
    const calls = model.calls
    const again = await proxy.prepare({ messages: [...history, assistant('ok'), user('go on')], keyName: 't', session: 's-del', budgetTokens: BUDGET })
    expect(again.kind).toBe('compacted')
    expect(summaryOf(again)).not.toBe(summaryOf(first))
    expect(model.calls).toBe(calls) // a crossing is merged from the ledger, the model never waited for
    expect(await proxy.forget('u', 'other')).toBe(0) // another key's session of that name is not this one
    await proxy.close()
    await store.close()
  })

  it.skipIf(pgMissing !== undefined)(
    `are dropped by another replica sharing the store once they are gone from it${pgMissing ? ` (skipped: ${pgMissing})` : ''}`,
    async () => {
      const url = freshPgUrl()
      const [a, b] = [new PostgresStore(url), new PostgresStore(url)]
      const model = countingModel()
      const [one, two] = [proxyOn(a, model), proxyOn(b, model)]
      const history = conversation('Port the parser to the new grammar', 30)
      const next = [...history, assistant('ok'), user('go on')]
      const first = await one.prepare({ messages: history, keyName: 't', session: 's-del', budgetTokens: BUDGET })
      await one.idle()
      expect(summaryOf(await two.prepare({ messages: next, keyName: 't', session: 's-del', budgetTokens: BUDGET }))).toBe(summaryOf(first))
      await two.idle()
      await one.forget('t', 's-del')
      expect((await a.deleteSession('s-del', 't')).cached).toBe(1)
      const after = await two.prepare({ messages: [...next, assistant('done'), user('and now?')], keyName: 't', session: 's-del', budgetTokens: BUDGET })
      expect(after.kind).toBe('compacted')
      expect(summaryOf(after)).not.toBe(summaryOf(first))
      for (const p of [one, two]) await p.close()
      for (const s of [a, b]) await s.close()
    }
  )
})
