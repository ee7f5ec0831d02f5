import { describe, expect, it } from 'vitest'
import { type Message, readLedger } from '../../src/compaction/index.js'
import { readShellCommand } from '../../src/compaction/shell.js'
import { allTranscripts } from '../helpers/corpus.js'
import { assistant, call, result, results, shellStep, user } from '../helpers/history.js'

const modified = (h: Message[]) => readLedger(h).filesModified.map((f) => f.path)

describe('readShellCommand', () => {
  it.each([
    ["sed -i 's/a/b/' src/x.py", ['src/x.py']],
    ["sed -i.bak -e 's/a/b/' -e 's/c/d/' a.py b.py", ['a.py', 'b.py']],
    ['echo hi > out.txt && echo more >> log/app.log 2>&1', ['out.txt', 'log/app.log']],
    ['printf x | tee -a notes.md other.md', ['notes.md', 'other.md']],
    ["cat > fix.py << 'EOF'\nprint('> not a file')\nEOF", ['fix.py']],
    ['cat <<EOF > conf.ini\n[x]\nEOF\nsed -i "s/1/2/" conf.ini', ['conf.ini', 'conf.ini']],
    ['mv old.py new.py', ['old.py', 'new.py']],
    ['cp a.txt b.txt', ['b.txt']],
    ['rm -f build/out.o tmp.txt', ['build/out.o', 'tmp.txt']],
    ["perl -pi -e 's/x/y/' lib.pl", ['lib.pl']],
    ['python run.py > /dev/null 2>&1', []]
  ])('%s writes %j', (command, expected) => {
    expect(readShellCommand(command).writes.map((w) => w.path)).toEqual(expected)
  })

  it('reads cat, head, tail, nl and sed -n', () => {
    expect(readShellCommand("cat a.py | head -5 && nl -ba src/b.py | sed -n '10,20p' && tail -n 3 c.log").reads).toEqual(['a.py', 'src/b.py', 'c.log'])
  })

  it('reads the files a patch applies from an inline heredoc', () => {
    const effects = readShellCommand("git apply <<'EOF'\n--- a/src/m.py\n+++ b/src/m.py\n@@\n-x\n+y\nEOF")
    expect(effects.applies).toHaveLength(1)
    expect(effects.applies[0]!.body).toContain('+++ b/src/m.py')
  })
})

describe('readLedger', () => {
  it('reads every tool family of section 2.5', () => {
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
    expect(ledger.userRequests).toEqual([{ message_index: 0, text: 'fix the bug' }])
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
      ...shellStep('1', 'pytest tests/test_a.py', '<returncode>1</returncode>\ncollected 3 items\nFAILED tests/test_a.py::test_x - AssertionError: 1 != 2\n1 failed, 2 passed'),
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
      { role: 'user', content: [{ type: 'text', text: '<compaction-summary id="c" version="1" compacted_turns="1">\n</compaction-summary>' }, { type: 'text', text: 'real ask\n  with lines' }] },
      assistant('ok')
    ]
    expect(readLedger(h).userRequests).toEqual([{ message_index: 0, text: 'real ask\n  with lines' }])
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
})

describe('more shell edits', () => {
  it('reads `patch -i FILE` as applying that patch, and `git checkout -- FILES` as restoring them', () => {
    const fx = readShellCommand('patch -p1 -i fix.diff && git checkout -- src/a.py src/b.py')
    expect(fx.applies).toEqual([expect.objectContaining({ source: 'fix.diff' })])
    expect(fx.writes.map((w) => [w.path, w.how])).toEqual([
      ['src/a.py', 'restored with git checkout'],
      ['src/b.py', 'restored with git checkout']
    ])
  })
})
