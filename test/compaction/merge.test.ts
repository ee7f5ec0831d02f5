import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { readLedger } from '../../src/compaction/ledger.js'
import { guardSections, mergeSections } from '../../src/compaction/merge.js'
import { type SummarySections, emptySections, itemPath } from '../../src/compaction/sections.js'
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

  /** The guard as a plain statement of what it must do: every ledger file named by some item, else put back. */
  function referenceGuard(given: SummarySections, ledger: ReturnType<typeof readLedger>): { modified: string[]; inspected: string[]; added: number } {
    const named = (items: string[]): Set<string> => {
      const out = new Set<string>()
      for (const item of items) {
        out.add(itemPath(item))
        if (item !== itemPath(item)) for (const w of item.split(/[\s`'"(),;]+/)) if (w.includes('/') || w.includes('.')) out.add(w.replace(/[.:]+$/, ''))
      }
      return out
    }
    let added = 0
    const modified = [...given.files_modified]
    const modifiedNames = named(modified)
    const putBack = new Set<string>()
    for (const f of ledger.filesModified) {
      if (modifiedNames.has(f.path)) continue
      modified.push(`${f.path} — ${f.how.join('; ')}`)
      modifiedNames.add(f.path)
      putBack.add(f.path)
      added++
    }
    const inspected = given.files_inspected.filter((i) => !putBack.has(itemPath(i)))
    const inspectedNames = named(inspected)
    for (const path of ledger.filesRead) {
      if (inspectedNames.has(path) || modifiedNames.has(path)) continue
      inspected.push(path)
      inspectedNames.add(path)
      added++
    }
    return { modified, inspected, added }
  }

  it('puts back exactly the files no item names, whether the summary lists the ledger in its order or not', () => {
    const path = fc.constantFrom('src/a.py', 'src/b.py', 'lib/c.ts', 'd.md', 'src/e.py', 'x/y/z.go', 'odd — name.py', '`tick`.py')
    const ledgerFiles = fc
      .uniqueArray(path, { maxLength: 8 })
      .chain((paths) =>
        fc.tuple(
          fc.constant(paths),
          fc.integer({ min: 0, max: paths.length }),
          fc.array(fc.constantFrom('edited', 'sed -i on src/b.py', 'wrote'), { minLength: 1, maxLength: 2 })
        )
      )
    const item = fc.oneof(
      path,
      path.map((p) => `${p} — read it`),
      fc.tuple(path, path).map(([p, q]) => `${p} — moved from ${q}`)
    )
    fc.assert(
      fc.property(
        ledgerFiles,
        fc.array(item, { maxLength: 6 }),
        fc.array(item, { maxLength: 6 }),
        fc.boolean(),
        fc.boolean(),
        ([paths, cut, how], extraModified, extraInspected, asExtractive, shuffle) => {
          const ledger = { ...readLedger([]), filesModified: paths.slice(0, cut).map((p) => ({ path: p, how })), filesRead: paths.slice(cut) }
          // the extractive summary's own lists, in the ledger's order, perhaps followed or replaced by others
          const ownModified = ledger.filesModified.map((f) => `${f.path} — ${f.how.join('; ')}`)
          const ownInspected = [...ledger.filesRead]
          const order = <T>(xs: T[]): T[] => (shuffle ? [...xs].reverse() : xs)
          const given = sections({
            files_modified: asExtractive ? [...order(ownModified), ...extraModified] : extraModified,
            files_inspected: asExtractive ? [...order(ownInspected), ...extraInspected] : extraInspected
          })
          const { sections: out, added } = guardSections(given, ledger)
          expect({ modified: out.files_modified, inspected: out.files_inspected, added }).toEqual(referenceGuard(given, ledger))
        }
      ),
      { numRuns: 2_000 }
    )
  })
})
