import { describe, expect, it } from 'vitest'
import {
  type Message,
  emptySections,
  extractiveSections,
  finishCompaction,
  fitSections,
  guardSections,
  mergeSections,
  planCompaction,
  readLedger
} from '../../src/compaction/index.js'
import { isEmptySearch, testResults, whyLines } from '../../src/compaction/failures.js'
import { isChatter, requestEntries, requestTitle, taskStatement } from '../../src/compaction/requests.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

const TASK =
  "Consider the following PR description:\n<pr_description>\nCache keys ignore the locale\nWhen two users with different locales load the same page, the second one sees the first one's language. The cache key must include the locale.\n</pr_description>\nPlease solve it."

describe('the objective', () => {
  it('is the first real request: echoes, markers, greetings, file listings and paths are passed over', () => {
    const requests = [
      '/status\n⎿  (no content)\n/hi is running…\n⎿  Read TODO.md (31 lines)',
      '[Transcript segment begins here; earlier context was not captured.]',
      'Hello!',
      '<uploaded_files>\n/workspace/repo\n</uploaded_files>',
      '/workspace/repo',
      'Add retries to the upload client. Keep the default at three attempts.'
    ]
    expect(taskStatement(requests)).toEqual({ index: 5, objective: 'Add retries to the upload client. Keep the default at three attempts.' })
  })

  it('prefers the title of an issue or PR the request carries, and skips a demonstration of another task', () => {
    expect(taskStatement([TASK])?.objective).toBe('Cache keys ignore the locale')
    expect(requestTitle('We are solving this issue.\nISSUE:\nTimeouts are not retried\nThe client gives up at once.')).toBe('Timeouts are not retried')
    const demo = `Here is a demonstration of the interface.\n--- DEMONSTRATION ---\nISSUE:\nAn unrelated example issue\n--- END OF DEMONSTRATION ---\nNow the real task.\nISSUE:\nThe parser drops trailing commas`
    expect(taskStatement([demo])?.objective).toBe('The parser drops trailing commas')
  })

  it('is a whole instruction, not its first short sentence', () => {
    const objective = taskStatement(['yes. add it. we should review all the stories under docs/stories and mark the ones already done'])?.objective
    expect(objective).toBe('yes. add it. we should review all the stories under docs/stories and mark the ones already done')
  })

  it('is never a label that opens the request', () => {
    for (const label of ['**Issue Text**', '## Task', 'Problem statement:', '__Bug report__']) {
      expect(taskStatement([`${label}\nThe exporter drops the header row of every sheet when the sheet is empty.`])?.objective).toBe(
        'The exporter drops the header row of every sheet when the sheet is empty.'
      )
    }
  })

  it('keeps a dot inside a name from ending the sentence', () => {
    expect(taskStatement(['I can no longer commit day-004.md from the GUI. The hook is not found. More detail follows here.'])?.objective).toBe(
      'I can no longer commit day-004.md from the GUI. The hook is not found.'
    )
  })

  it('passes over a format complaint the harness repeats, with only its numbers changed', () => {
    const nag = (n: number) => `Please always provide EXACTLY ONE action in triple backticks, found ${n} actions.`
    expect(isChatter(nag(2), 2)).toBe(true)
    expect(taskStatement([nag(2), nag(3), 'Fix the flaky login test in the auth suite'])?.objective).toBe('Fix the flaky login test in the auth suite')
  })

  it('stands over merges unless a newer request plainly sets another task', () => {
    const older = emptySections()
    older.objective = 'Cache keys ignore the locale'
    const newer = emptySections()
    newer.objective = 'run the tests again'
    expect(mergeSections(older, newer, ['run the tests again']).objective).toBe('Cache keys ignore the locale')
    const other =
      'Consider the following PR description:\n<pr_description>\nExport fails on empty tables\nExporting a workbook with an empty sheet raises.\n</pr_description>'
    newer.objective = 'Export fails on empty tables'
    expect(mergeSections(older, newer, [other]).objective).toBe('Export fails on empty tables')
  })
})

describe('errors that say why', () => {
  it('keep the exception line of a traceback, not its frames', () => {
    const out = [
      '<returncode>1</returncode>',
      'Traceback (most recent call last):',
      '  File "run.py", line 3, in <module>',
      '    main()',
      '  File "app.py", line 10, in main',
      '    raise ValueError("bad locale: xx")',
      'ValueError: bad locale: xx'
    ].join('\n')
    expect(whyLines(out, 4)).toEqual(['ValueError: bad locale: xx'])
  })

  it.each([
    ['pytest', 'tests/test_a.py:12: in test_x\nE       assert 1 == 2\nE        +  where 1 = f()', 'E       assert 1 == 2'],
    ['rustc', 'error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:2:5', 'error[E0425]: cannot find value `x` in this scope'],
    [
      'tsc',
      "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.",
      "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'."
    ],
    ['go', '--- FAIL: TestParse (0.00s)\n    parse_test.go:9: got 1, want 2', '--- FAIL: TestParse (0.00s)'],
    [
      'node',
      "TypeError: Cannot read properties of undefined (reading 'id')\n    at f (/app/x.js:3:9)",
      "TypeError: Cannot read properties of undefined (reading 'id')"
    ],
    ['shell', 'bash: pytest: command not found', 'bash: pytest: command not found']
  ])('%s failure lines are kept', (_runner, output, line) => {
    expect(whyLines(output, 4)).toContain(line)
  })

  it('merge the same command failing the same way into one entry with a count, and mark one that later succeeded resolved', () => {
    const failing = 'Traceback (most recent call last):\n  File "t.py", line 1\nAssertionError: 3 != 4\n<returncode>1</returncode>'
    const history: Message[] = [
      user('fix the sum'),
      ...shellStep('a', 'python t.py', failing, true),
      ...shellStep('b', 'python t.py', failing, true),
      ...shellStep('c', 'python t.py', failing, true),
      ...shellStep('d', 'python t.py', 'ok\n<returncode>0</returncode>'),
      ...shellStep('e', 'make lint', 'error: line too long\n<returncode>2</returncode>', true),
      assistant('done')
    ]
    const ledger = readLedger(history)
    expect(ledger.errors).toEqual([
      expect.objectContaining({ call: 'python t.py', count: 3, resolved: true, lines: ['AssertionError: 3 != 4'] }),
      expect.objectContaining({ call: 'make lint', count: 1, resolved: false })
    ])
    const entries = extractiveSections(ledger, 'done').failing_tests_and_errors
    expect(entries).toEqual([
      'bash `python t.py` failed (3 times): AssertionError: 3 != 4 — resolved: a later run of it succeeded and printed no failure',
      'bash `make lint` failed: error: line too long'
    ])
  })

  it('do not count a search that found nothing', () => {
    expect(isEmptySearch('grep -n "def x" a.py', '<returncode>1</returncode>\n<output>\n</output>', 1)).toBe(true)
    expect(isEmptySearch('cd /repo && find . -name "*.orig"', '', 1)).toBe(true)
    expect(isEmptySearch('test -f setup.cfg', '[Command finished with exit code 1]', 1)).toBe(true)
    expect(isEmptySearch('nl -ba x.py | grep "def has_"', '', 1)).toBe(true)
    expect(isEmptySearch('grep -n x a.py', 'grep: a.py: No such file or directory', 2)).toBe(false)
    expect(isEmptySearch('pytest -x', '', 1)).toBe(false)
    const ledger = readLedger([user('look'), ...shellStep('a', 'grep -rn "TODO" src', '<returncode>1</returncode>', true), assistant('none')])
    expect(ledger.errors).toEqual([])
    expect(ledger.commands[0]!.outcome).toBe('no_match')
  })
})

describe('failing tests', () => {
  it.each([
    [
      'pytest',
      'FAILED tests/test_cache.py::test_locale - AssertionError: en != fr',
      { id: 'tests/test_cache.py::test_locale', status: 'failed', reason: 'AssertionError: en != fr' }
    ],
    ['pytest -v', 'tests/test_cache.py::test_locale PASSED                [ 50%]', { id: 'tests/test_cache.py::test_locale', status: 'passed' }],
    ['unittest', 'FAIL: test_locale (tests.test_cache.CacheTest)', { id: 'tests.test_cache.CacheTest.test_locale', status: 'failed' }],
    ['go', '--- FAIL: TestLocale (0.01s)', { id: 'TestLocale', status: 'failed' }],
    ['cargo', 'test cache::tests::locale ... FAILED', { id: 'cache::tests::locale', status: 'failed' }],
    ['jest', '  ✕ keeps the locale in the key (4 ms)', { id: 'keeps the locale in the key', status: 'failed' }]
  ])('are read from %s', (_runner, line, expected) => {
    expect(testResults(line)).toEqual([expected])
  })

  it('are all named with their latest status', () => {
    const run1 = 'FAILED tests/test_a.py::test_one - KeyError\nFAILED tests/test_a.py::test_two - ValueError\n<returncode>1</returncode>'
    const run2 = 'tests/test_a.py::test_one PASSED\ntests/test_a.py::test_two FAILED\n<returncode>1</returncode>'
    const ledger = readLedger([user('fix'), ...shellStep('a', 'pytest', run1, true), ...shellStep('b', 'pytest -v', run2, true), assistant('one left')])
    expect(extractiveSections(ledger, '').failing_tests_and_errors.slice(0, 2)).toEqual([
      'tests/test_a.py::test_one — failed earlier, passes now',
      'FAILING tests/test_a.py::test_two — ValueError'
    ])
  })
})

describe('requests and next steps', () => {
  it('collapse a request repeated with only numbers changed, with a count, and the guard accepts the collapsed form', () => {
    const nag = (n: number) => `Please provide exactly one action, found ${n}.`
    const texts = [TASK, nag(2), nag(3), nag(2)]
    expect(requestEntries(texts)).toEqual([TASK, 'Please provide exactly one action, found 2. (×3, numbers varied)'])
    const history: Message[] = [user(TASK), assistant('a'), user(nag(2)), assistant('b'), user(nag(3)), assistant('c'), user(nag(2)), assistant('d')]
    const ledger = readLedger(history)
    const sections = extractiveSections(ledger, 'd')
    expect(guardSections(sections, ledger).added).toBe(0)
  })

  it('keeps exactly one "where the work stood" and the newest to-do list, whatever the number of merges', () => {
    const todo = (status: string) =>
      call(`t${status}`, 'TodoWrite', {
        todos: [
          { content: 'add the locale to the key', status },
          { content: 'write a test', status: 'pending' }
        ]
      })
    let summary = emptySections()
    for (const [k, status] of ['pending', 'in_progress', 'completed'].entries()) {
      const history: Message[] = [
        user(k === 0 ? TASK : 'go on'),
        assistant(todo(status)),
        results(result(`t${status}`, 'ok')),
        assistant(`stood at round ${k}`)
      ]
      const written = extractiveSections(readLedger(history), `stood at round ${k}`)
      summary = k === 0 ? written : mergeSections(summary, written, ['go on'])
    }
    expect(summary.current_plan).toEqual(['To-do [completed]: add the locale to the key', 'To-do [pending]: write a test'])
    expect(summary.next_steps).toEqual(['Where the work stood: stood at round 2'])
  })

  it('shortens every other request before the task statement, and then only from its end', () => {
    const long = `${TASK}\n${'The locale comes from the Accept-Language header. '.repeat(200)}`
    const sections = emptySections()
    sections.objective = 'Cache keys ignore the locale'
    sections.user_requests = [long, ...Array.from({ length: 30 }, (_, i) => `step ${i}: ${'please also check the logs carefully '.repeat(20)}`)]
    const fitted = fitSections(sections, 2_500, { id: 'cmp_t', compactedTurns: 31 })
    const task = fitted.user_requests.find((r) => r.startsWith('Consider the following PR description'))!
    expect(task.length).toBeGreaterThan(1_000)
    expect(long.startsWith(task.replace(/…$/, ''))).toBe(true)
    for (const r of fitted.user_requests.filter((r) => r !== task)) expect(r.length).toBeLessThan(task.length)
  })

  it('end to end: a mini agent run gives a real objective, errors with reasons and one work-stood entry', () => {
    const nag = 'Please always provide EXACTLY ONE action in triple backticks, found 2 actions.'
    const history: Message[] = [
      user(TASK),
      ...shellStep('a', 'grep -rn locale src/cache.py', '<returncode>1</returncode>', true),
      user(nag),
      ...shellStep(
        'b',
        'python repro.py',
        'Traceback (most recent call last):\n  File "repro.py", line 2\nKeyError: \'locale\'\n<returncode>1</returncode>',
        true
      ),
      user(nag),
      assistant('fixed; rerunning'),
      user('go on')
    ]
    const plan = planCompaction({ messages: history, mode: 'manual', budgetTokens: 45_000, sizingBudgetTokens: 45_000, keepTurns: 1, dryRun: false })
    const s = finishCompaction(plan, { id: 'cmp_e2e' }).summary!.sections
    expect(s.objective).toBe('Cache keys ignore the locale')
    expect(s.failing_tests_and_errors).toEqual(["bash `python repro.py` failed: KeyError: 'locale'"])
    expect(s.user_requests.filter((r) => r.startsWith('Please always'))).toEqual([`${nag} (×2)`])
    expect(s.next_steps.filter((n) => n.startsWith('Where the work stood'))).toHaveLength(1)
  })
})
