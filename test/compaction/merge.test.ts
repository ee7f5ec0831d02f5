import { describe, expect, it } from 'vitest'
import { readLedger } from '../../src/compaction/ledger.js'
import { guardSections, mergeSections } from '../../src/compaction/merge.js'
import { type SummarySections, emptySections } from '../../src/compaction/sections.js'
import { TODO_LABEL, WORK_STOOD } from '../../src/compaction/extractive.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

const sections = (s: Partial<SummarySections>): SummarySections => ({ ...emptySections(), ...s })

describe('mergeSections', () => {
  it('keeps one entry a file, the newer description winning, and lists a modified file there only', () => {
    const older = sections({ files_modified: ['a.py — added x'], files_inspected: ['b.py — read', 'c.py — read'] })
    const newer = sections({ files_modified: ['a.py — added x and y', 'b.py — fixed'], files_inspected: ['c.py — read again'] })
    const out = mergeSections(older, newer)
    expect(out.files_modified).toEqual(['a.py — added x and y', 'b.py — fixed'])
    expect(out.files_inspected).toEqual(['c.py — read again'])
  })

  it('keeps the older objective unless a newer request sets another task', () => {
    const older = sections({ objective: 'Fix the date parser for UTC+14' })
    const newer = sections({ objective: 'Add a websocket pool' })
    expect(mergeSections(older, newer, ['and add a test']).objective).toBe('Fix the date parser for UTC+14')
    expect(mergeSections(older, newer, ['ISSUE:\nAdd a websocket pool with limits']).objective).toBe('Add a websocket pool')
    expect(mergeSections(sections({}), newer).objective).toBe('Add a websocket pool')
  })

  it('replaces a restated item in place and keeps the rest, nothing of the older dropped', () => {
    const older = sections({ key_decisions: ['use SQLite for the records', 'keep the API stable'] })
    const newer = sections({ key_decisions: ['Use SQLite for the records (superseded: PostgreSQL)', 'add a cache'] })
    expect(mergeSections(older, newer).key_decisions).toEqual(['Use SQLite for the records (superseded: PostgreSQL)', 'keep the API stable', 'add a cache'])
  })

  it('takes the newest state of a test or a failed call', () => {
    const older = sections({ failing_tests_and_errors: ['FAILING t::a — boom', 'bash `make` failed: no rule'] })
    const newer = sections({ failing_tests_and_errors: ['t::a — failed earlier, passes now', 'bash `make` failed (2 times): no rule'] })
    expect(mergeSections(older, newer).failing_tests_and_errors).toEqual(['t::a — failed earlier, passes now', 'bash `make` failed (2 times): no rule'])
  })

  it('keeps one "where the work stood" and one to-do list, the newest', () => {
    const older = sections({ next_steps: [`${WORK_STOOD} old`, `${TODO_LABEL} [pending]: a`, 'ship it'] })
    const newer = sections({ next_steps: [`${WORK_STOOD} new`, `${TODO_LABEL} [done]: a`] })
    expect(mergeSections(older, newer).next_steps).toEqual(['ship it', `${WORK_STOOD} new`, `${TODO_LABEL} [done]: a`])
  })

  it('keeps a request restated by both summaries once, and adds up repeats', () => {
    const older = sections({ user_requests: ['fix the parser', 'found 2 errors (×2)'] })
    const newer = sections({ user_requests: ['fix the parser', 'found 5 errors'] })
    expect(mergeSections(older, newer).user_requests).toEqual(['fix the parser', 'found 5 errors (×3, numbers varied)'])
  })
})

describe('guardSections', () => {
  const history = [
    user('Fix the config loader'),
    assistant(call('t1', 'Read', { file_path: 'src/config.ts' }), call('t2', 'Edit', { file_path: 'src/loader.ts', old_string: 'a', new_string: 'b' })),
    results(result('t1', 'contents'), result('t2', 'ok')),
    user('also update the docs')
  ]

  it('puts back every file and request the summary left out, and says how many', () => {
    const ledger = readLedger(history)
    const { sections: out, added } = guardSections(sections({ user_requests: ['Fix the config loader'] }), ledger)
    expect(out.files_modified.map((i) => i.split(' — ')[0])).toEqual(['src/loader.ts'])
    expect(out.files_inspected).toEqual(['src/config.ts'])
    expect(out.user_requests).toEqual(['Fix the config loader', 'also update the docs'])
    expect(added).toBe(3)
  })

  it('counts a path the summary names in prose as present, and does not change its input', () => {
    const ledger = readLedger(history)
    const given = sections({
      files_modified: ['loader — rewrote `src/loader.ts` to read env first'],
      files_inspected: ['src/config.ts — the keys'],
      user_requests: ['Fix the config loader', 'also update the docs']
    })
    const before = JSON.stringify(given)
    expect(guardSections(given, ledger).added).toBe(0)
    expect(JSON.stringify(given)).toBe(before)
  })

  it('moves a file the model listed as read but the ledger saw modified', () => {
    const ledger = readLedger(history)
    const { sections: out } = guardSections(sections({ files_inspected: ['src/loader.ts — read it'] }), ledger)
    expect(out.files_inspected).not.toContain('src/loader.ts — read it')
    expect(out.files_modified[0]).toMatch(/^src\/loader\.ts — /)
  })
})
