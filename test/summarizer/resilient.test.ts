import { describe, expect, it } from 'vitest'
import { CORE_REDACTORS, emptySections, planCompaction } from '../../src/compaction/index.js'
import { SummarizerFailedError } from '../../src/summarizer/errors.js'
import { SummarizerFault } from '../../src/summarizer/faults.js'
import { ResilientSummarizer } from '../../src/summarizer/resilient.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from '../../src/summarizer/summarizer.js'
import { shellStep, user } from '../helpers/history.js'

const plan = planCompaction({
  messages: [user('fix it'), ...Array.from({ length: 20 }, (_, i) => shellStep(`t${i}`, `echo ${i}`, 'x'.repeat(400))).flat()],
  mode: 'manual',
  budgetTokens: 2_000,
  sizingBudgetTokens: 2_000,
  keepTurns: 2,
  dryRun: false
})

const modelReport: SummarizeResult['report'] = {
  kind: 'anthropic',
  model: 'm',
  input_tokens: 10,
  output_tokens: 5,
  calls: 1,
  fallback_reason: null,
  duration_ms: 1
}

/** A model that answers after `ms`, or fails with `error`, and records the signal it was given. */
function model(behaviour: { ms?: number; error?: unknown }): Summarizer & { signals: AbortSignal[] } {
  const signals: AbortSignal[] = []
  return {
    kind: 'anthropic',
    signals,
    summarize: (r: SummarizeRequest) =>
      new Promise<SummarizeResult>((resolve, reject) => {
        if (r.signal) signals.push(r.signal)
        if (behaviour.error !== undefined) return reject(behaviour.error)
        const timer = setTimeout(() => resolve({ sections: emptySections(), report: modelReport }), behaviour.ms ?? 0)
        r.signal?.addEventListener('abort', () => {
          clearTimeout(timer)
          reject(r.signal?.reason)
        })
      })
  }
}

describe('ResilientSummarizer', () => {
  it('passes the model’s summary through when it comes in time', async () => {
    const out = await new ResilientSummarizer(model({ ms: 5 }), { timeoutMs: 1_000, fallback: 'extractive' }).summarize({ redactors: CORE_REDACTORS, plan })
    expect(out.report).toEqual(modelReport)
    expect(out.sections).toEqual(emptySections())
  })

  it('falls back to the extractive summary past its deadline, and aborts the model call', async () => {
    const m = model({ ms: 10_000 })
    const out = await new ResilientSummarizer(m, { timeoutMs: 30, fallback: 'extractive' }).summarize({ redactors: CORE_REDACTORS, plan })
    expect(out.sections).toBeUndefined()
    expect(out.report).toMatchObject({ kind: 'extractive', fallback_reason: 'timeout', calls: 0 })
    expect(out.report.duration_ms).toBeGreaterThanOrEqual(25)
    expect(m.signals[0]?.aborted).toBe(true)
  })

  it('names the fault it fell back for', async () => {
    const out = await new ResilientSummarizer(model({ error: new SummarizerFault('refusal', 'no') }), { timeoutMs: 1_000, fallback: 'extractive' }).summarize({
      redactors: CORE_REDACTORS,
      plan
    })
    expect(out.report.fallback_reason).toBe('refusal')
  })

  it('raises a 502 naming the fault when the operator forbids the fallback', async () => {
    const s = new ResilientSummarizer(model({ error: new SummarizerFault('rate_limited', 'slow down') }), { timeoutMs: 1_000, fallback: 'error' })
    const err = await s.summarize({ redactors: CORE_REDACTORS, plan }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SummarizerFailedError)
    expect(err).toMatchObject({ status: 502, reason: 'rate_limited' })
  })

  it('passes the caller’s abort on to the model call', async () => {
    const m = model({ ms: 10_000 })
    const caller = new AbortController()
    const pending = new ResilientSummarizer(m, { timeoutMs: 5_000, fallback: 'extractive' }).summarize({
      redactors: CORE_REDACTORS,
      plan,
      signal: caller.signal
    })
    caller.abort(new SummarizerFault('cancelled', 'client went away'))
    const out = await pending
    expect(m.signals[0]?.aborted).toBe(true)
    expect(out.report.fallback_reason).toBe('cancelled')
  })
})
