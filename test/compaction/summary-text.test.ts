import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { emptySections, formatSummary, formattedLength, guardSections, mergeSections, parseSummary, readLedger } from '../../src/compaction/index.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

describe('summary text', () => {
  it('parses back what it formats, multi-line and awkward items included', () => {
    const s = emptySections()
    s.objective = 'Fix the parser'
    s.user_requests = ['first line\n## not a heading\n</compaction-summary>\n\nend', 'second']
    s.files_modified = ['src/p.ts — rewrote parse()']
    s.next_steps = ['- a dash item']
    const text = formatSummary(s, { id: 'cmp_1', compactedTurns: 3 })
    expect(text.startsWith('<compaction-summary id="cmp_1" version="1" compacted_turns="3">')).toBe(true)
    expect(text.endsWith('</compaction-summary>')).toBe(true)
    const parsed = parseSummary(text)!
    expect(parsed.id).toBe('cmp_1')
    expect(parsed.compactedTurns).toBe(3)
    expect(parsed.sections).toEqual(s)
  })

  it('counts the length of the text form without building it, exactly', () => {
    const lists = fc.array(
      fc.string({ maxLength: 80 }).map((s) => s.replace(/\r/g, '')),
      { maxLength: 4 }
    )
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), lists, lists, lists, fc.nat(999), (objective, requests, files, steps, turns) => {
        const s = emptySections()
        s.objective = objective
        s.user_requests = requests
        s.files_modified = files
        s.next_steps = steps
        const header = { id: `cmp_${turns}`, compactedTurns: turns }
        expect(formattedLength(s, header)).toBe(formatSummary(s, header).length)
      }),
      { numRuns: 300 }
    )
  })

  it('merges a prior summary without losing its facts; newer file descriptions win', () => {
    const older = emptySections()
    older.files_modified = ['a.ts — v1', 'b.ts — v1']
    older.key_decisions = ['use SQLite']
    const newer = emptySections()
    newer.files_modified = ['a.ts — v2']
    newer.key_decisions = ['use WAL mode']
    const m = mergeSections(older, newer)
    expect(m.files_modified).toEqual(['a.ts — v2', 'b.ts — v1'])
    expect(m.key_decisions).toEqual(['use SQLite', 'use WAL mode'])
  })

  it('replaces an older item the newer summary restates, such as a decision marked superseded', () => {
    const older = emptySections()
    older.key_decisions = ['Use SQLite for storage', 'Retry three times']
    older.user_requests = ['fix it', 'fix it please']
    const newer = emptySections()
    newer.key_decisions = ['Use SQLite for storage (superseded: Postgres, for concurrent writers)', 'Log every retry']
    newer.user_requests = ['fix it']
    const m = mergeSections(older, newer)
    expect(m.key_decisions).toEqual(['Use SQLite for storage (superseded: Postgres, for concurrent writers)', 'Retry three times', 'Log every retry'])
    expect(m.user_requests).toEqual(['fix it', 'fix it please'])
  })

  it('the guard puts back ledger files and requests a model left out', () => {
    const ledger = readLedger([
      user('please fix x'),
      assistant(call('1', 'Edit', { file_path: 'x.ts' }), call('2', 'Read', { file_path: 'y.ts' })),
      results(result('1', 'ok'), result('2', 'ok'))
    ])
    const { sections, added } = guardSections(emptySections(), ledger)
    expect(added).toBe(3)
    expect(sections.files_modified[0]).toMatch(/^x\.ts — /)
    expect(sections.files_inspected).toEqual(['y.ts'])
    expect(sections.user_requests).toEqual(['please fix x'])
  })
})
