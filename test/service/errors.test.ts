import { describe, expect, it } from 'vitest'
import { validateHistory } from '../../src/compaction/index.js'
import { InvalidHistoryError, SummarizerUnavailableError } from '../../src/service/errors.js'

describe('service errors', () => {
  it('a block of the wrong shape is a 400 and a broken conversation a 422, each naming the place', () => {
    const shape = validateHistory([{ role: 'user', content: [{ type: 'tool_result' }] }])
    const order = validateHistory([
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: {} }] },
      { role: 'user', content: 'no result' }
    ])
    expect(shape?.kind).toBe('shape')
    expect(order?.kind).not.toBe('shape')
    const a = new InvalidHistoryError(shape!)
    const b = new InvalidHistoryError(order!)
    expect([a.status, a.path]).toEqual([400, shape!.path])
    expect([b.status, b.type, b.path]).toEqual([422, 'invalid_request_error', order!.path])
  })

  it('a summarizer the server lacks is a 400 at /summarizer that says how to enable it', () => {
    const err = new SummarizerUnavailableError('anthropic')
    expect(err).toMatchObject({ status: 400, path: '/summarizer', requested: 'anthropic' })
    expect(err.message).toContain('set ANTHROPIC_API_KEY')
  })
})
