import { describe, expect, it } from 'vitest'
import { TODO_LABEL, WORK_STOOD, extractiveSections } from '../../src/compaction/extractive.js'
import { type Message, readLedger } from '../../src/compaction/index.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

describe('extractiveSections', () => {
  const history: Message[] = [
    user('ISSUE:\nThe CSV importer drops the last row\nsteps to reproduce...'),
    assistant(call('r1', 'Read', { file_path: 'src/importer.py' })),
    results(result('r1', 'def load(): ...')),
    ...shellStep(
      's1',
      'python -m pytest tests/test_importer.py',
      'FAILED tests/test_importer.py::test_last_row - AssertionError: 2 != 3\n<returncode>1</returncode>',
      true
    ),
    assistant(call('e1', 'Edit', { file_path: 'src/importer.py', old_string: 'rows[:-1]', new_string: 'rows' })),
    results(result('e1', 'ok')),
    ...shellStep('s2', 'python -m pytest tests/test_importer.py', 'tests/test_importer.py::test_last_row PASSED\n<returncode>0</returncode>'),
    assistant(call('t1', 'TodoWrite', { todos: [{ content: 'add a changelog entry', status: 'pending' }] })),
    results(result('t1', 'ok')),
    user('thanks')
  ]

  it('states the objective from the task, lists every request and the files the ledger saw', () => {
    const s = extractiveSections(readLedger(history), 'The fix is in; next the changelog.')
    expect(s.objective).toBe('The CSV importer drops the last row')
    // an acknowledgement is folded into one line that quotes it
    expect(s.user_requests).toEqual([history[0]!.content, '(1 short reply folded: "thanks")'])
    expect(s.files_modified).toEqual([expect.stringMatching(/^src\/importer\.py — /)])
    expect(s.files_inspected).toEqual([])
  })

  it('gives each test its latest status, puts the to-do list in the plan and says where the work stood', () => {
    const s = extractiveSections(readLedger(history), '  The fix is in; next the changelog.  ')
    expect(s.failing_tests_and_errors[0]).toBe('tests/test_importer.py::test_last_row — failed earlier, passes now')
    expect(s.current_plan[0]).toBe(`${TODO_LABEL} [pending]: add a changelog entry`)
    expect(s.next_steps).toEqual([`${WORK_STOOD} The fix is in; next the changelog.`])
  })

  it('counts the commands run by outcome, naming the newest six, as progress, not as the plan', () => {
    const many = Array.from({ length: 15 }, (_, i) => shellStep(`c${i}`, `echo step ${i}\nsecond line`, `step ${i}\n<returncode>0</returncode>`)).flat()
    const s = extractiveSections(readLedger([user('run the steps'), ...many]), '')
    expect(s.current_plan).toEqual([
      'Progress — ok (15 runs): `echo step 9`, `echo step 10`, `echo step 11`, `echo step 12`, `echo step 13`, `echo step 14` and 9 more'
    ])
    expect(s.next_steps).toEqual([])
  })

  it('lists the ways one call failed before it succeeded as one resolved entry, before the unresolved ones', () => {
    const h = [
      user('build it'),
      ...shellStep('a', 'make', 'make: *** No rule to make target\n<returncode>2</returncode>', true),
      ...shellStep('b', 'make', 'error: missing header foo.h\n<returncode>2</returncode>', true),
      ...shellStep('c', 'make', 'built\n<returncode>0</returncode>'),
      ...shellStep('d', 'make install', 'Permission denied\n<returncode>1</returncode>', true)
    ]
    const errors = extractiveSections(readLedger(h), '').failing_tests_and_errors
    expect(errors).toHaveLength(2)
    expect(errors[0]).toMatch(/^bash `make` failed \(2 times\): .*missing header foo\.h.* — resolved: a later run of it succeeded and printed no failure$/)
    expect(errors[1]).toMatch(/^bash `make install` failed: Permission denied$/)
  })
})
