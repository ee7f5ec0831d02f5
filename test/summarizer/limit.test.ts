import { describe, expect, it } from 'vitest'
import { CancelledError, OverloadedError } from '../../src/summarizer/errors.js'
import { LimitedSummarizer } from '../../src/summarizer/limit.js'
import type { SummarizeRequest, SummarizeResult, Summarizer } from '../../src/summarizer/summarizer.js'
import { CORE_REDACTORS } from '../../src/compaction/index.js'

/** A summarizer that answers when told to. */
class Gate implements Summarizer {
  readonly kind = 'anthropic' as const
  readonly open: (() => void)[] = []
  summarize(): Promise<SummarizeResult> {
    return new Promise((resolve) =>
      this.open.push(() =>
        resolve({ report: { kind: 'anthropic', model: 'm', input_tokens: 0, output_tokens: 0, calls: 1, fallback_reason: null, duration_ms: 0 } })
      )
    )
  }
}

const request = (signal?: AbortSignal): SummarizeRequest => ({ plan: {} as SummarizeRequest['plan'], redactors: CORE_REDACTORS, signal })

describe('LimitedSummarizer', () => {
  it('turns a summary away after maxWaitMs in the queue, with the Retry-After the 503 carries', async () => {
    const gate = new Gate()
    const limited = new LimitedSummarizer(gate, { concurrency: 1, queue: 4, maxWaitMs: 50, retryAfterS: 7 })
    const running = limited.summarize(request())
    const waiting = limited.summarize(request())
    await expect(waiting).rejects.toThrow(OverloadedError)
    await expect(waiting).rejects.toMatchObject({ retryAfterS: 7, message: expect.stringContaining('no summary place within 50 ms') })
    expect(limited.load).toEqual({ active: 1, waiting: 0 })
    gate.open.shift()!()
    await running
    expect(limited.load).toEqual({ active: 0, waiting: 0 })
  })

  it('lets a summary whose client went away leave the queue at once, and passes the place on to the next', async () => {
    const gate = new Gate()
    const limited = new LimitedSummarizer(gate, { concurrency: 1, queue: 4, maxWaitMs: 10_000, retryAfterS: 1 })
    const running = limited.summarize(request())
    const client = new AbortController()
    const gone = limited.summarize(request(client.signal))
    const next = limited.summarize(request())
    expect(limited.load).toEqual({ active: 1, waiting: 2 })
    client.abort()
    await expect(gone).rejects.toThrow(CancelledError)
    expect(limited.load).toEqual({ active: 1, waiting: 1 })
    gate.open.shift()!()
    await running
    await new Promise((r) => setImmediate(r))
    gate.open.shift()!()
    await next
    expect(limited.load).toEqual({ active: 0, waiting: 0 })
  })

  it('refuses at once when the queue is full', async () => {
    const gate = new Gate()
    const limited = new LimitedSummarizer(gate, { concurrency: 1, queue: 0, maxWaitMs: 10_000, retryAfterS: 1 })
    const running = limited.summarize(request())
    await expect(limited.summarize(request())).rejects.toThrow(/1 summaries in flight and 0 waiting/)
    gate.open.shift()!()
    await running
  })
})
