import { describe, expect, it } from 'vitest'
import { ExtractiveSummarizer, extractiveReport } from '../../src/summarizer/extractive.js'

describe('ExtractiveSummarizer', () => {
  it('asks the core for the extractive summary and reports no model, no calls and no fallback', async () => {
    const out = await new ExtractiveSummarizer().summarize()
    expect(out.sections).toBeUndefined()
    expect(out.report).toEqual(extractiveReport(null, 0))
    expect(out.report).toEqual({ kind: 'extractive', model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: 0 })
  })
})

describe('extractiveReport', () => {
  it('names the reason a model summary was not had, and how long the attempt took', () => {
    expect(extractiveReport('timeout', 1_234)).toMatchObject({ kind: 'extractive', fallback_reason: 'timeout', duration_ms: 1_234, calls: 0 })
  })
})
