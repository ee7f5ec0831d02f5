import { describe, expect, it } from 'vitest'
import {
  DEFAULT_RENDER,
  type Message,
  extractiveSections,
  finishCompaction,
  planCompaction,
  readLedger,
  renderSpan,
  renderedSpan,
  spanText
} from '../../src/compaction/index.js'
import { ConversationsText } from '../../src/service/conversations.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

/**
 * Sessions of several harnesses, made here: a task wrapped in its harness's instructions and complaints
 * (mini-swe-agent-like), a preamble every session of a key sends (OpenHands-like), a chat client's
 * requests with ANSI codes, acknowledgements and rejected calls (Claude Code-like).
 */
const words = (n: number, seed: string): string => Array.from({ length: n }, (_, i) => `${seed}${i % 37}`).join(' ')
const INSTRUCTIONS = `<instructions>\n# Task Instructions\n${Array.from({ length: 60 }, (_, i) => `Rule ${i}: ${words(12, 'obey')}`).join('\n')}\n</instructions>`
const complaint = (n: number): string =>
  `Please always provide EXACTLY ONE action in triple backticks, found ${n} actions.\n\nPlease format your action as shown in the example above.`

function harnessTask(title: string, body: string): string {
  return `<pr_description>\nConsider the following PR description:\n${title}\n${body}\n</pr_description>\n\n${INSTRUCTIONS}`
}

function compact(messages: Message[], budget = 30_000, commonText?: (fp: string) => boolean) {
  const plan = planCompaction({
    messages,
    mode: 'manual',
    budgetTokens: budget,
    sizingBudgetTokens: budget,
    keepTokens: Math.floor(budget / 3),
    keepTurns: 2,
    dryRun: false,
    ...(commonText ? { commonText } : {})
  })
  return { plan, out: finishCompaction(plan, { id: 'cmp_t' }) }
}

/** A short session after the task: a few steps and the harness's complaints between them. */
function agentSession(task: string, complaints: number): Message[] {
  const out: Message[] = [user(task)]
  for (let i = 0; i < 6; i++) {
    out.push(...shellStep(`s${i}`, `grep -n thing${i} src/mod${i}.py`, `src/mod${i}.py:${i}: thing${i}\n<returncode>0</returncode>`))
    if (i < complaints) out.push(assistant(`THOUGHT: two commands at once ${i}`), user(complaint(i + 2)))
  }
  out.push(assistant('THOUGHT: done looking.'), user('go on'))
  return out
}

describe("the user's words, not the harness's", () => {
  it('keeps the task verbatim and names the tagged instructions and the repeated complaint once, in a line each', () => {
    const task = harnessTask('Dates parse wrong in UTC+14', 'When the offset is +14:00 the parser rolls back a day.\nSee parse_date in utils.')
    const { out } = compact(agentSession(task, 4))
    const text = out.summary.text
    expect(text).toContain('When the offset is +14:00 the parser rolls back a day.')
    expect(text).toContain('Dates parse wrong in UTC+14')
    expect(text).not.toContain('Rule 7:')
    expect(text.match(/\[harness text left out: <instructions>/g)).toHaveLength(1)
    // the complaint came in every step: it is named once, never copied whole
    expect(text.match(/EXACTLY ONE action/g)).toHaveLength(1)
    const mentioning = text.split('\n').filter((l) => /EXACTLY ONE|Please format your action/.test(l))
    expect(mentioning.length).toBeGreaterThan(0)
    for (const l of mentioning) expect(l.trim()).toMatch(/^(?:- )?\[harness text left out: sent \d times, "/)
    expect(out.summary.sections.objective).toBe('Dates parse wrong in UTC+14')
  })

  it("leaves out a preamble the key's other conversations sent too, and keeps what only this user said", () => {
    const preamble = (repo: string) =>
      `I've uploaded a code repository in the directory ${repo}.\nCan you help me implement the necessary changes to the repository so that the requirements are met?\nFollow these steps to resolve the issue, and make the minimal changes to non-test files.`
    const conversations = new ConversationsText()
    conversations.learn('acme', 's:one', [`${preamble('/workspace/alpha')}\n\nThe cache ignores the locale when keys are built.`])
    conversations.learn('acme', 's:two', [`${preamble('/workspace/beta')}\n\nExports drop the header row of every sheet.`])
    const mine = `${preamble('/workspace/gamma')}\n\nRetries double the wait on every attempt but never cap it at sixty seconds.`
    const history = agentSession(mine, 0)
    const { out } = compact(history, 30_000, conversations.common('acme', 's:three'))
    expect(out.summary.text).toContain('Retries double the wait on every attempt but never cap it at sixty seconds.')
    expect(out.summary.text).not.toContain('make the minimal changes to non-test files')
    expect(out.summary.text).toMatch(/\[harness text left out \(other sessions sent it too\)/)
    // another key's conversations are not this key's
    const other = compact(history, 30_000, conversations.common('other-key', 's:three'))
    expect(other.out.summary.text).toContain('make the minimal changes to non-test files')
  })
})

describe('true statuses', () => {
  const run = (id: string, output: string, exit: number): Message[] =>
    shellStep(id, 'python3 reproduce.py', `${output}\n<returncode>${exit}</returncode>`, exit !== 0)

  it('keeps a run that exits 0 but prints the bug as a finding, and does not call the earlier crash resolved', () => {
    const h = [
      user('Fix the view-only permission check on inlines'),
      ...run('a', 'Traceback (most recent call last):\n  File "r.py", line 1\nImportError: no module named app', 1),
      ...run('b', 'FAIL: view-only user can edit the inline', 0),
      user('go on')
    ]
    const s = extractiveSections(readLedger(h), '')
    expect(s.failing_tests_and_errors).toContain('`python3 reproduce.py` exited 0 but printed: FAIL: view-only user can edit the inline')
    const crash = s.failing_tests_and_errors.find((e) => e.includes('ImportError'))
    expect(crash).toMatch(/a later run of it exited 0 but still printed a failure$/)
    expect(crash).not.toMatch(/resolved/)
  })

  it('states no exit status the history does not hold (a tool output with none, as Chat Completions gives it)', () => {
    const h = [
      user('Fix the API test'),
      ...shellStep('p1', 'pytest tests/test_api.py', 'FAILED tests/test_api.py::test_get - AssertionError: 404 != 200\n1 failed'),
      ...shellStep('p2', 'python3 check.py', 'ImportError: no module named api', true),
      ...shellStep('p3', 'python3 check.py', 'FAIL: the route is missing'),
      user('go on')
    ]
    const s = extractiveSections(readLedger(h), '')
    const text = s.failing_tests_and_errors.join('\n')
    expect(text).toContain('`pytest tests/test_api.py` printed: FAILED tests/test_api.py::test_get')
    expect(text).toContain('a later run of it still printed a failure')
    expect(text).not.toMatch(/exited \d/)
  })

  it('resolves both once a later run prints no failure', () => {
    const h = [
      user('Fix the view-only permission check on inlines'),
      ...run('a', 'ImportError: no module named app', 1),
      ...run('b', 'FAIL: view-only user can edit the inline', 0),
      ...run('c', 'all checks passed', 0),
      user('go on')
    ]
    const s = extractiveSections(readLedger(h), '')
    expect(s.failing_tests_and_errors).toEqual([
      '`python3 reproduce.py` exited 0 but printed: FAIL: view-only user can edit the inline — gone: a later run of it printed none of this',
      'bash `python3 reproduce.py` failed: ImportError: no module named app — resolved: a later run of it succeeded and printed no failure'
    ])
  })

  it('keeps each failing test with its whole reason, ahead of requests, under a small budget', () => {
    const reason = 'AssertionError: expected the cached value for locale de_DE to differ from en_US but both were "Preis"'
    const h: Message[] = [
      user(`Make the cache locale-aware. ${words(3_000, 'detail')}`),
      ...shellStep('t', 'python -m pytest tests', `FAILED tests/test_cache.py::test_locale - ${reason}\n<returncode>1</returncode>`, true),
      assistant('Looking into it.'),
      user('check how the key is built'),
      ...shellStep('k', 'grep -n key src/cache.py', 'src/cache.py:3: key = name\n<returncode>0</returncode>'),
      assistant('The key leaves the locale out.'),
      user('then fix it'),
      assistant('On it.'),
      user('go on')
    ]
    const { out } = compact(h, 3_000)
    expect(out.kept_from).toBeGreaterThan(3)
    expect(out.summary.text).toContain('FAILING tests/test_cache.py::test_locale')
  })
})

describe('objective, plan and next steps', () => {
  it("states the task the work is on at the cut, keeps the first among the requests, plans from the agent's own words", () => {
    const h: Message[] = [
      user('Add running of coverage to the hi command and report the missing lines'),
      ...shellStep('a', 'make coverage', 'TOTAL 91%\n<returncode>0</returncode>'),
      user('Now move the path resolution out of the CLI into the library and spec it'),
      assistant('Plan for the move:\n1. Move get_user_path into the library\n2. Spec absolute, relative and missing paths\n3. Pass --user straight through'),
      ...shellStep('b', 'pytest specs', 'ok\n<returncode>0</returncode>'),
      assistant('The first step is in. Next I will write the spec for relative paths.'),
      user('yes')
    ]
    const s = extractiveSections(readLedger(h), '')
    expect(s.objective).toBe('Now move the path resolution out of the CLI into the library and spec it')
    expect(s.user_requests[0]).toBe('Add running of coverage to the hi command and report the missing lines')
    expect(s.current_plan.slice(0, 3)).toEqual([
      'Plan: Move get_user_path into the library',
      'Plan: Spec absolute, relative and missing paths',
      'Plan: Pass --user straight through'
    ])
    expect(s.current_plan.slice(3)).toEqual(['Progress — ok (2 runs): `make coverage`, `pytest specs`'])
    expect(s.next_steps).toEqual(['Where the work stood: Next I will write the spec for relative paths.'])
    expect(s.user_requests.at(-1)).toBe('(1 short reply folded: "yes")')
  })
})

describe('noise out', () => {
  it('strips ANSI codes, spells each file once, lists only paths, and does not count a rejected call as an error', () => {
    const h: Message[] = [
      user('\u001b[1mRefactor\u001b[22m the formatter in [1mcli.py[22m so that books print as one list'),
      assistant(
        call('r1', 'Read', { file_path: '/home/dev/proj/src/cli.py' }),
        call('r2', 'Read', { file_path: 'src/cli.py' }),
        call('r3', 'Read', { file_path: 'docs/day-01[3-9].md' })
      ),
      results(result('r1', 'x'), result('r2', 'x'), result('r3', 'x')),
      assistant(call('w1', 'Write', { file_path: '/tmp/probe.py', content: 'x' })),
      results(result('w1', "The user doesn't want to proceed with this tool use. The tool use was rejected.", true)),
      user('ok')
    ]
    const s = extractiveSections(readLedger(h), '')
    expect(s.user_requests[0]).toBe('Refactor the formatter in cli.py so that books print as one list')
    expect(s.files_inspected).toEqual(['src/cli.py'])
    expect(s.failing_tests_and_errors).toEqual([])
    expect(s.rejected_approaches).toEqual(['the user rejected `Write /tmp/probe.py`'])
  })
})

describe('what the model summarizer is sent', () => {
  it("is the user's words too: the instructions named, not copied, and fewer tokens than the prompts as sent", () => {
    const task = harnessTask('Exports drop the header row', 'Every sheet loses its first row when exported to CSV.')
    const span = agentSession(task, 4)
    const cleaned = spanText(renderSpan(span))
    const asSent = spanText(renderSpan(span, 0, { ...DEFAULT_RENDER, prompts: 'as-sent' }))
    expect(cleaned).toContain('Every sheet loses its first row when exported to CSV.')
    expect(cleaned).not.toContain('Rule 7:')
    expect(asSent).toContain('Rule 7:')
    expect(cleaned.length).toBeLessThan(asSent.length / 2)
  })
})

describe('failing tests, named and told why', () => {
  it('gives a test the reason line pytest cut in its summary, whole', () => {
    const output = [
      '____________________________ test_rows ____________________________',
      '    def test_rows():',
      '>       assert rows[3] == 4',
      'E       IndexError: list index out of range while reading the fourth row of sheet one',
      '=========================== short test summary info ===========================',
      'FAILED tests/test_sheet.py::test_rows - IndexError: list index out of ra...',
      '<returncode>1</returncode>'
    ].join('\n')
    const s = extractiveSections(readLedger([user('make the sheet tests pass'), ...shellStep('p', 'pytest tests', output, true), user('go on')]), '')
    expect(s.failing_tests_and_errors[0]).toBe(
      'FAILING tests/test_sheet.py::test_rows — IndexError: list index out of range while reading the fourth row of sheet one'
    )
  })

  it('names a unittest failure once (Python 3.11 repeats the method in the parentheses) with its exception line', () => {
    const output = [
      'test_add (test_ops.OpsTest.test_add) ... FAIL',
      '',
      '======================================================================',
      'FAIL: test_add (test_ops.OpsTest.test_add)',
      '----------------------------------------------------------------------',
      'Traceback (most recent call last):',
      '  File "test_ops.py", line 5, in test_add',
      '    self.assertEqual(add(2, 2), 5)',
      'AssertionError: 4 != 5',
      '<returncode>1</returncode>'
    ].join('\n')
    const s = extractiveSections(
      readLedger([user('make the ops tests pass'), ...shellStep('u', 'python -m unittest test_ops', output, true), user('go on')]),
      ''
    )
    expect(s.failing_tests_and_errors[0]).toBe('FAILING test_ops.OpsTest.test_add — AssertionError: 4 != 5')
  })
})

describe('what the model is sent, across replicas', () => {
  it('does not depend on what a replica has seen of other conversations (so replicas share a cached summary)', () => {
    const preamble = 'Every session of this key opens with this paragraph, word for word, from the harness.'
    const messages = agentSession(`${preamble}\n\nRetries never cap their wait at sixty seconds.`, 0)
    const opts = { messages, mode: 'manual' as const, budgetTokens: 30_000, sizingBudgetTokens: 30_000, keepTokens: 10_000, keepTurns: 2, dryRun: false }
    const knowing = planCompaction({ ...opts, commonText: () => true })
    const unknowing = planCompaction(opts)
    expect(spanText(renderedSpan(knowing))).toBe(spanText(renderedSpan(unknowing)))
    // while the extractive summary of the replica that knows leaves the preamble out
    expect(finishCompaction(knowing, { id: 'cmp_k' }).summary.text).not.toContain(preamble)
    expect(finishCompaction(unknowing, { id: 'cmp_u' }).summary.text).toContain(preamble)
  })
})
