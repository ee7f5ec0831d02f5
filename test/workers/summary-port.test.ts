import { describe, expect, it } from 'vitest'
import { type CompactionPlan, planCompaction, renderedSpan } from '../../src/compaction/index.js'
import { compactionRedactors } from '../../src/secrets/index.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from '../../src/summarizer/summarizer.js'
import { PortSummarizer, RemoteSummaryError, summaryPort } from '../../src/workers/summary-port.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { until } from '../helpers/wait.js'

const SECRET = 'sk-live-0123456789abcdefghijklmnopqrstuv'

function plan(): CompactionPlan {
  const messages = [
    user('Deploy the service'),
    ...shellStep('t1', 'cat .env', `STRIPE_KEY=${SECRET}\n${'log line\n'.repeat(50)}`),
    assistant('Read the environment.'),
    user('go on')
  ]
  return planCompaction({ messages, mode: 'manual', budgetTokens: 100_000, sizingBudgetTokens: 100_000, keepTurns: 1, dryRun: false })
}

/** A model that records what it was asked, or fails. */
function model(answer: (request: SummarizeRequest) => Promise<SummarizeResult>): Summarizer & { asked: SummarizeRequest[] } {
  const asked: SummarizeRequest[] = []
  return {
    kind: 'anthropic',
    asked,
    summarize: (request) => {
      asked.push(request)
      return answer(request)
    }
  }
}

describe('a summary asked for over a port', () => {
  it('gives the model the plan without its span, rendered and redacted where it was made, and the secrets found there', async () => {
    const m = model(async () => ({ sections: { objective: 'deployed' } as never, report: { kind: 'anthropic', calls: 1, duration_ms: 5 } as never }))
    const main = summaryPort(m)
    const worker = new PortSummarizer(main.port, 'anthropic')
    const p = plan()
    const redactors = compactionRedactors()
    const expected = renderedSpan(p, compactionRedactors())
    const result = await worker.summarize({ plan: p, redactors, instructions: 'Keep the deploy steps', keyName: 'alpha', session: 's1' })
    expect(result.sections).toEqual({ objective: 'deployed' })
    const request = m.asked[0]!
    expect(request.plan.span).toEqual([])
    expect(request.plan.reclip).toBeUndefined()
    expect(request.plan.rendered).toEqual(expected)
    expect(JSON.stringify(request.plan)).not.toContain(SECRET)
    expect(request).toMatchObject({ instructions: 'Keep the deploy steps', keyName: 'alpha', session: 's1' })
    // the main thread's redactors know the secret: a model repeating it bare is caught there too
    expect(request.redactors.redact(`the key is ${SECRET}`)).not.toContain(SECRET)
    // what the main thread renders of that plan is what the worker rendered: nothing redacted again
    expect(renderedSpan(request.plan, request.redactors)).toBe(request.plan.rendered)
    worker.close()
    main.close()
  })

  it("throws the model's fault on the main thread as it was thrown, and as a RemoteSummaryError in the worker", async () => {
    const fault = new Error('overloaded: no place for the summary')
    const main = summaryPort(model(() => Promise.reject(fault)))
    const worker = new PortSummarizer(main.port, 'anthropic')
    await expect(worker.summarize({ plan: plan(), redactors: compactionRedactors() })).rejects.toEqual(new RemoteSummaryError(fault.message))
    expect(main.errors).toEqual([fault])
    worker.close()
    main.close()
  })

  it('passes the hang-up to the model', async () => {
    const hangUp = new AbortController()
    const m = model(
      (request) =>
        new Promise((_resolve, reject) => request.signal?.addEventListener('abort', () => reject(new Error('aborted by the client')), { once: true }))
    )
    const main = summaryPort(m, hangUp.signal)
    const worker = new PortSummarizer(main.port, 'anthropic')
    const asked = worker.summarize({ plan: plan(), redactors: compactionRedactors() })
    await until('the model is asked', () => m.asked.length > 0)
    hangUp.abort()
    await expect(asked).rejects.toThrow('aborted by the client')
    worker.close()
    main.close()
  })
})
