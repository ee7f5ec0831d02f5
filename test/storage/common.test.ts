import { describe, expect, it } from 'vitest'
import { emptySections, formatSummary } from '../../src/compaction/index.js'
import { decodeCursor, encodeCursor, withSections } from '../../src/storage/common.js'
import { InvalidCursorError } from '../../src/storage/store.js'

describe('cursors', () => {
  it('round-trip a position, opaque to the client', () => {
    const cursor = encodeCursor(1234)
    expect(cursor).not.toContain('1234')
    expect(decodeCursor(cursor)).toBe(1234)
  })

  it('refuse one the server did not make with a typed error', () => {
    expect(() => decodeCursor('not-a-cursor')).toThrow(InvalidCursorError)
    expect(() => decodeCursor(Buffer.from('s12x').toString('base64url'))).toThrow(InvalidCursorError)
  })
})

describe('withSections', () => {
  it('parses the sections back out of the kept text', () => {
    const sections = { ...emptySections(), objective: 'ship it', files_modified: ['a.py — x'] }
    const text = formatSummary(sections, { id: 'cmp_1', compactedTurns: 3 })
    const stored = {
      id: 'cmp_1',
      session_id: null,
      key_name: '',
      created_at: '2026-01-01T00:00:00.000Z',
      mode: 'auto',
      reason: 'over_budget',
      stats: {},
      summarizer: {},
      doctrine_version: 'v',
      summary: { text }
    }
    expect(withSections(stored as never).summary).toEqual({ text, sections })
  })
})
