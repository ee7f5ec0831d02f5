import { describe, expect, it } from 'vitest'
import { exitCodeOf, isSignalLine, shortLine, signalLines } from '../../src/compaction/signal.js'

describe('isSignalLine', () => {
  it.each([
    'Traceback (most recent call last):',
    '  File "src/app.py", line 12, in main',
    'E       assert 1 == 2',
    'FAILED tests/test_a.py::test_b',
    'ValueError: bad input',
    'npm ERR! code ELIFECYCLE',
    '3 passed, 1 failed in 0.2s',
    '    at Object.<anonymous> (/src/a.js:10:5)',
    'bash: foo: command not found',
    '<returncode>1</returncode>'
  ])('keeps %j', (line) => expect(isSignalLine(line)).toBe(true))

  it.each(['', 'Collecting packages', 'def handler(request):', 'All done in 3 s'])('leaves %j', (line) => expect(isSignalLine(line)).toBe(false))
})

describe('signalLines', () => {
  it('returns the signal lines in order, at most `limit`, each cut to 300 characters', () => {
    const long = `error: ${'x'.repeat(400)}`
    const out = signalLines(['building', long, 'fine', 'FAILED one', 'FAILED two'].join('\n'), 2)
    expect(out).toEqual([shortLine(long), 'FAILED one'])
    expect(out[0]).toHaveLength(301)
    expect(out[0]!.endsWith('…')).toBe(true)
  })
})

describe('exitCodeOf', () => {
  it.each([
    ['<returncode>2</returncode>\nls: cannot access', 2],
    ['output\n[Command finished with exit code 127]', 127],
    ['Process exited. Exit code: -1', -1],
    ['exit status 3', 3],
    ['all good', undefined]
  ])('reads %j as %s', (output, code) => expect(exitCodeOf(output)).toBe(code))

  it('reads only the start and the end of a long output, where the agents put the code', () => {
    const filler = 'x'.repeat(5_000)
    expect(exitCodeOf(`<returncode>1</returncode>\n${filler}`)).toBe(1)
    expect(exitCodeOf(`${filler}\n[Command finished with exit code 4]`)).toBe(4)
    expect(exitCodeOf(`${filler}\nexit code 9 in the middle\n${filler}`)).toBeUndefined()
  })
})
