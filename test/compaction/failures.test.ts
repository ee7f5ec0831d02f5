import { describe, expect, it } from 'vitest'
import { WHY_HINT, WHY_LINE, isEmptySearch, mayReportTest, testResults, whyLines } from '../../src/compaction/failures.js'

describe('whyLines', () => {
  it('keeps the exception line of a traceback, not its frames', () => {
    const out = [
      'Traceback (most recent call last):',
      '  File "a.py", line 3, in <module>',
      '    main()',
      "KeyError: 'user'",
      '<returncode>1</returncode>'
    ].join('\n')
    expect(whyLines(out, 4)).toEqual(["KeyError: 'user'"])
  })

  it('puts exceptions first, then other lines that say why, each once, at most `limit`', () => {
    const out = [
      'src/x.ts:3:7: error TS2345: wrong type',
      'Traceback (most recent call last):',
      '  File "b.py", line 1',
      'ValueError: bad',
      'src/x.ts:3:7: error TS2345: wrong type',
      'npm ERR! code 2',
      'bash: jq: command not found'
    ].join('\n')
    expect(whyLines(out, 3)).toEqual(['ValueError: bad', 'src/x.ts:3:7: error TS2345: wrong type', 'npm ERR! code 2'])
  })

  it('keeps the last exceptions when there are more than the limit', () => {
    const tb = (name: string) => `Traceback (most recent call last):\n  File "a.py", line 1\n${name}: x`
    expect(whyLines([tb('AError'), tb('BError'), tb('CError')].join('\n'), 2)).toEqual(['BError: x', 'CError: x'])
  })

  it('skips harness framing and chained-exception prose, and cuts long lines to 300 characters', () => {
    const long = `Error: ${'y'.repeat(400)}`
    const out = whyLines(['=====  FAILURES  =====', 'During handling of the above exception', long].join('\n'), 5)
    expect(out).toEqual([`${long.slice(0, 300)}…`])
  })

  it('finds nothing in an output that does not fail', () => {
    expect(whyLines('Collected 3 items\nall fine\n', 5)).toEqual([])
  })
})

describe('isEmptySearch', () => {
  it.each([
    ['grep -rn foo src', '', 1, true],
    ['cd repo && rg needle', '<returncode>1</returncode>', 1, true],
    ['find . -name x.py | head', '', 1, true],
    ['test -f setup.cfg', '[Command finished with exit code 1]', 1, true],
    ['sudo grep x /etc/hosts', '', 1, true],
    ['grep foo src', 'grep: src: Is a directory', 1, false],
    ['grep foo src', '', 2, false],
    ['python run.py', '', 1, false],
    ['grep foo src', '', undefined, false]
  ])('%j with %j and exit %s: %s', (command, output, exit, empty) => {
    expect(isEmptySearch(command, output, exit)).toBe(empty)
  })

  // a client that reports no exit status, only an error flag and its own words around nothing printed
  it.each([
    ['rg -n needle src', 'Waiting…\n\nError: Error', true],
    ['cd repo && grep -rn "x" lib', 'Error', true],
    ['brew list | grep pre-commit', 'Error: Error', true],
    ['grep foo src', 'Error: grep: src: No such file or directory', false],
    ['python run.py', 'Waiting…\n\nError: Error', false]
  ])('%j flagged an error with %j: %s', (command, output, empty) => {
    expect(isEmptySearch(command, output, undefined, true)).toBe(empty)
    expect(isEmptySearch(command, output, undefined, false)).toBe(false)
  })
})

describe('testResults', () => {
  it('reads the shapes of pytest, unittest, go test, cargo test, Jest and Vitest', () => {
    const output = [
      'FAILED tests/test_a.py::test_one - AssertionError: 1 != 2',
      'tests/test_a.py::test_two PASSED [ 50%]',
      'FAIL: test_three (pkg.tests.TestX)',
      'test_four (pkg.tests.TestX) ... ok',
      '--- FAIL: TestFive (0.01s)',
      'test mod::six ... FAILED',
      '  ✕ renders seven (3 ms)',
      '  ✓ renders eight'
    ].join('\n')
    expect(testResults(output)).toEqual([
      { id: 'tests/test_a.py::test_one', status: 'failed', reason: 'AssertionError: 1 != 2' },
      { id: 'tests/test_a.py::test_two', status: 'passed' },
      { id: 'pkg.tests.TestX.test_three', status: 'failed' },
      { id: 'pkg.tests.TestX.test_four', status: 'passed' },
      { id: 'TestFive', status: 'failed' },
      { id: 'mod::six', status: 'failed' },
      { id: 'renders seven', status: 'failed' },
      { id: 'renders eight', status: 'passed' }
    ])
  })

  it('reports nothing for an output with no test in it, and skips lines over 500 characters', () => {
    expect(testResults('compiling...\ndone')).toEqual([])
    expect(testResults(`FAILED a.py::${'t'.repeat(600)}`)).toEqual([])
  })
})

describe('the quick look before the line patterns', () => {
  it('passes every line the patterns take: no line that says why is passed over', async () => {
    const fc = (await import('fast-check')).default
    const words = [
      'Error',
      'error TS2345:',
      'ValueError',
      'Exception',
      'SystemExit',
      'KeyboardInterrupt',
      'Failure',
      'Warning',
      'FAILED',
      'FAIL',
      'ERROR',
      '--- FAIL:',
      'fatal',
      'panic',
      'panicked at',
      'npm ERR!',
      'AssertionError',
      'assert x == y',
      '✕',
      '×',
      '✗',
      '●',
      'command not found',
      'No such file or directory',
      'Permission denied',
      'ModuleNotFoundError',
      'cannot find module',
      'is not defined',
      'E   ',
      'e  x',
      'thread main',
      ':12:3: error',
      ': fatal error'
    ]
    const piece = fc.oneof(fc.constantFrom(...words), fc.string({ maxLength: 5 }), fc.constantFrom(' ', '  ', '\t', ':', '.', 'a.b.'))
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const line = pieces.join('')
        if (WHY_LINE.test(line)) expect(WHY_HINT.test(line), line).toBe(true)
      }),
      { numRuns: 3_000 }
    )
  })
})

describe('the quick look before the test-line patterns', () => {
  it('passes every line testResults would read a result from', async () => {
    const fc = (await import('fast-check')).default
    const words = [
      'FAILED ',
      'ERROR ',
      'FAIL: ',
      'ERROR: ',
      'tests/a.py::t',
      ' PASSED',
      ' ... ',
      'ok',
      '--- FAIL: ',
      '--- PASS: ',
      'test ',
      '✕ ',
      '× ',
      '✓ ',
      '√ ',
      '(m.T)',
      ' - ',
      '(3 ms)'
    ]
    const piece = fc.oneof(fc.constantFrom(...words), fc.string({ maxLength: 4 }), fc.constantFrom(' ', '  ', '\t'))
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 7 }), (pieces) => {
        const line = pieces.join('')
        if (testResults(line).length > 0) expect(mayReportTest(line), line).toBe(true)
      }),
      { numRuns: 3_000 }
    )
  })
})
