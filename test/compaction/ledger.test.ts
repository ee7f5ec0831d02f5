import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Block, type Message, readLedger } from '../../src/compaction/index.js'
import { allTranscripts } from '../helpers/corpus.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

const modified = (h: Message[]) => readLedger(h).filesModified.map((f) => f.path)

describe('readLedger', () => {
  it('reads every tool family: writes, reads, editors, patches and shell commands', () => {
    const h: Message[] = [
      user('fix the bug'),
      assistant(
        call('1', 'Edit', { file_path: 'a/edit.py', old_string: 'x', new_string: 'y' }),
        call('2', 'Write', { file_path: 'a/write.py', content: '' }),
        call('3', 'MultiEdit', { file_path: 'a/multi.py', edits: [] }),
        call('4', 'str_replace_editor', { command: 'str_replace', path: '/w/editor.py', old_str: 'a', new_str: 'b' }),
        call('5', 'str_replace_based_edit_tool', { command: 'create', path: '/w/new.py', file_text: '' }),
        call('6', 'str_replace_editor', { command: 'view', path: '/w/viewed.py' }),
        call('7', 'apply_patch', { input: '*** Begin Patch\n*** Update File: p/patched.ts\n@@\n-a\n+b\n*** Add File: p/added.ts\n+x\n*** End Patch' }),
        call('8', 'write', { filePath: 'oc/written.ts', content: '' }),
        call('9', 'Read', { file_path: 'docs/read.md' }),
        call('10', 'bash', { command: "sed -i 's/a/b/' sh/sed.py && echo x > sh/redirect.txt" })
      ),
      results(...['1', '2', '3', '4', '5', '6', '7', '8', '9', '10'].map((id) => result(id, 'ok')))
    ]
    const ledger = readLedger(h)
    expect(ledger.filesModified.map((f) => f.path)).toEqual([
      'a/edit.py',
      'a/write.py',
      'a/multi.py',
      '/w/editor.py',
      '/w/new.py',
      'p/patched.ts',
      'p/added.ts',
      'oc/written.ts',
      'sh/sed.py',
      'sh/redirect.txt'
    ])
    expect(ledger.filesRead).toEqual(['/w/viewed.py', 'docs/read.md'])
    expect(ledger.userRequests).toEqual([{ message_index: 0, text: 'fix the bug', shape: 'fix the bug' }])
  })

  it("follows SWE-agent's open file for edit and insert", () => {
    const h: Message[] = [
      user('go'),
      assistant(call('1', 'open', { path: 'src/fields.py' })),
      results(result('1', '[File: src/fields.py]')),
      assistant(call('2', 'edit', { search: 'a', replace: 'b' })),
      results(result('2', 'ok'))
    ]
    expect(modified(h)).toEqual(['src/fields.py'])
  })

  it('records commands with their outcome and errors with their signal lines', () => {
    const h: Message[] = [
      user('run the tests'),
      ...shellStep(
        '1',
        'pytest tests/test_a.py',
        '<returncode>1</returncode>\ncollected 3 items\nFAILED tests/test_a.py::test_x - AssertionError: 1 != 2\n1 failed, 2 passed'
      ),
      ...shellStep('2', 'ls', '<returncode>0</returncode>\na b'),
      ...shellStep('3', 'cat missing.txt', 'cat: missing.txt: No such file or directory', true)
    ]
    const ledger = readLedger(h)
    expect(ledger.commands.map((c) => [c.command, c.outcome, c.exit_code])).toEqual([
      ['pytest tests/test_a.py', 'error', 1],
      ['ls', 'ok', 0],
      ['cat missing.txt', 'error', undefined]
    ])
    expect(ledger.errors[0]!.lines).toContain('FAILED tests/test_a.py::test_x - AssertionError: 1 != 2')
    expect(ledger.errors).toHaveLength(2)
  })

  it('does not count a write whose call failed', () => {
    expect(modified([user('go'), assistant(call('1', 'Edit', { file_path: 'x.py' })), results(result('1', 'String not found', true))])).toEqual([])
  })

  it('keeps every prompt verbatim and leaves out the service summary blocks', () => {
    const h: Message[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: '<compaction-summary id="c" version="1" compacted_turns="1">\n</compaction-summary>' },
          { type: 'text', text: 'real ask\n  with lines' }
        ]
      },
      assistant('ok')
    ]
    expect(readLedger(h).userRequests).toEqual([{ message_index: 0, text: 'real ask\n  with lines', shape: 'real ask with lines' }])
  })

  it('names most files of the final diff in the mini-swe-agent runs of the corpus', () => {
    const runs = allTranscripts().filter((t) => t.metadata?.ground_truth?.files_in_final_diff)
    expect(runs.length).toBeGreaterThan(0)
    let found = 0
    let total = 0
    for (const t of runs) {
      const ledger = readLedger(t.messages)
      const paths = [...ledger.filesModified.map((f) => f.path), ...ledger.filesRead]
      for (const f of t.metadata!.ground_truth!.files_in_final_diff!) {
        total++
        if (paths.some((p) => p === f || p.endsWith(`/${f}`))) found++
      }
    }
    expect(found / total).toBeGreaterThan(0.8)
  })

  it('matches a step’s results to its calls by id, in whatever order they come', () => {
    // a parallel step: some calls fail (a write that fails modifies nothing), some are left unanswered
    const step = (n: number): { calls: Message; answers: Block[] } => {
      const calls = Array.from({ length: n }, (_, i) =>
        i % 3 === 0 ? call(`c${i}`, 'Write', { file_path: `w/${i}.py`, content: '' }) : call(`c${i}`, 'bash', { command: `cat r/${i}.txt && exit ${i % 2}` })
      )
      const answers = calls.flatMap((_call, i) => (i % 5 === 4 ? [] : [result(`c${i}`, i % 2 ? 'boom' : 'ok', i % 7 === 0)]))
      return { calls: assistant(...calls), answers }
    }
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }).chain((n) => fc.tuple(fc.constant(n), fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }))),
        ([n, order]) => {
          const { calls, answers } = step(n)
          const inOrder = readLedger([user('go'), calls, results(...answers)])
          const shuffled = readLedger([user('go'), calls, results(...order.filter((k) => k < answers.length).map((k) => answers[k]!))])
          expect(shuffled).toEqual(inOrder)
        }
      ),
      { numRuns: 300 }
    )
  })
})

describe('commandLine', () => {
  it("reads a command given as arguments: a shell's script, else the words", async () => {
    const { commandLine } = await import('../../src/compaction/ledger.js')
    expect(commandLine(['bash', '-lc', 'cargo test part1'])).toBe('cargo test part1')
    expect(commandLine(['/bin/zsh', '-c', 'ls -la'])).toBe('ls -la')
    expect(commandLine(['git', 'status', '--short'])).toBe('git status --short')
    expect(commandLine(['bash', '-lc', 1])).toBeUndefined()
    expect(commandLine([])).toBeUndefined()
  })
})

describe('a call the user declined', () => {
  // each client's own words for it, flagged an error or not (Codex flags none)
  it.each([
    [
      'Claude Code',
      "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file).",
      true
    ],
    ["Claude Code's prompt", 'Waiting…\n\nNo (tell Claude what to do differently)', true],
    ['opencode', 'The user rejected permission to use this specific tool call. You may try again with different parameters.', true],
    ['Codex', 'exec command rejected by user', false],
    ['Cline', 'The user denied this operation.', true],
    ['Gemini CLI', 'User did not allow tool call', true]
  ])("is a rejected approach in %s's wording, never a failed command", (_client, text, flagged) => {
    const h: Message[] = [
      user('Clean the build folder'),
      assistant(call('d1', 'Bash', { command: 'rm -rf build' })),
      results(result('d1', text, flagged)),
      assistant('Stopping.'),
      user('ok')
    ]
    const ledger = readLedger(h)
    expect(ledger.rejected).toEqual(['rm -rf build'])
    expect(ledger.errors).toEqual([])
  })

  it('is read in one pass over outputs of any size and shape', () => {
    for (const text of [`${'\n'.repeat(200_000)}x`, `${' '.repeat(200_000)}x`, `Error${' '.repeat(100)}x`]) {
      const h: Message[] = [
        user('Go'),
        assistant(call('b1', 'Bash', { command: 'grep -rn x .' })),
        results(result('b1', text, true)),
        assistant('ok'),
        user('ok')
      ]
      expect(readLedger(h).rejected).toEqual([])
    }
  })

  it('is not read into an output that merely mentions a refusal', () => {
    const h: Message[] = [
      user('Deploy'),
      assistant(call('p1', 'Bash', { command: 'ssh deploy@host ./release.sh' })),
      results(result('p1', 'deploy@host: Permission denied (publickey).', true)),
      assistant('The key is missing.'),
      user('ok')
    ]
    const ledger = readLedger(h)
    expect(ledger.rejected).toEqual([])
    expect(ledger.errors.length).toBeGreaterThan(0)
  })
})

describe('a search that found nothing, in a client that reports no exit status', () => {
  it('is an outcome (no match), not an error', () => {
    const h: Message[] = [
      user('Find the callers'),
      assistant(call('g1', 'Bash', { command: 'rg -n "legacyLoad" src' })),
      results(result('g1', 'Waiting…\n\nError: Error', true)),
      assistant('No callers.'),
      user('ok')
    ]
    const ledger = readLedger(h)
    expect(ledger.errors).toEqual([])
    expect(ledger.commands.map((c) => c.outcome)).toEqual(['no_match'])
  })
})
