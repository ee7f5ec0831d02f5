import { describe, expect, it } from 'vitest'
import { patchFiles, readShellCommand } from '../../src/compaction/shell.js'

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

describe('the shell reader, by what a command does', () => {
  it('honours quotes and escapes: a quoted `>` is no redirection, a quoted name is one word', () => {
    expect(readShellCommand(`echo "a > b" > 'my file.txt'`).writes).toEqual([{ path: 'my file.txt', how: 'written by shell redirection' }])
    expect(readShellCommand('echo x > a\\ b.txt').writes.map((w) => w.path)).toEqual(['a b.txt'])
  })

  it('skips wrappers, assignments and timeouts before the command', () => {
    expect(readShellCommand('sudo FOO=1 rm -rf dist/x.js').writes.map((w) => w.path)).toEqual(['dist/x.js'])
    expect(readShellCommand('timeout 30 cat data/in.csv').reads).toEqual(['data/in.csv'])
  })

  it('does not take /dev/null, stderr redirections or descriptors for files written', () => {
    expect(readShellCommand('make 2> err.log > /dev/null 2>&1').writes).toEqual([])
  })

  it('records the scripts a command runs, and the patch a `patch < FILE` applies', () => {
    expect(readShellCommand('./reproduce.sh && bash tests/run.sh -v').runs).toEqual(['reproduce.sh', 'tests/run.sh'])
    expect(readShellCommand('bash -c "echo hi"').runs).toEqual([])
    expect(readShellCommand('patch -p1 < fix.patch').applies).toEqual([{ source: 'fix.patch', body: undefined }])
  })

  it('reads grep’s files after its pattern, and all of them when the pattern comes with -e', () => {
    expect(readShellCommand('grep -n needle src/a.py src/b.py').reads).toEqual(['src/a.py', 'src/b.py'])
    expect(readShellCommand('grep -e needle src/a.py').reads).toEqual(['src/a.py'])
    expect(readShellCommand('grep -rn "x" src/').reads).toEqual([])
  })

  it('keeps a heredoc written to a file, so that a later `git apply FILE` can read it', () => {
    const fx = readShellCommand("cat > fix.patch <<'EOF'\n--- a/x.py\n+++ b/x.py\nEOF\ngit apply fix.patch")
    expect(fx.heredocs).toEqual([{ path: 'fix.patch', body: '--- a/x.py\n+++ b/x.py' }])
    expect(fx.applies).toEqual([{ source: 'fix.patch', body: undefined }])
  })

  it('reads nothing from a command it does not know', () => {
    expect(readShellCommand('python -m pytest tests/test_x.py')).toEqual({ writes: [], reads: [], heredocs: [], applies: [], runs: [] })
  })
})

describe('patchFiles', () => {
  it('reads unified diff headers, each path once, never /dev/null', () => {
    const patch = '--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n--- /dev/null\n+++ b/src/new.py\n'
    expect(patchFiles(patch)).toEqual(['src/m.py', 'src/new.py'])
  })

  it('reads apply_patch headers for files updated, added and deleted', () => {
    const patch = '*** Begin Patch\n*** Update File: src/a.ts\n@@\n*** Add File: src/b.ts\n+x\n*** Delete File: old/c.ts\n*** End Patch'
    expect(patchFiles(patch)).toEqual(['src/a.ts', 'src/b.ts', 'old/c.ts'])
  })

  it('finds no files in text that is not a patch', () => expect(patchFiles('just words\n- a list item')).toEqual([]))
})

describe('paths after cd, and commands over several lines', () => {
  it('reads relative paths against the directory a cd moved to, as the rest of the session spells them', () => {
    const e = readShellCommand('cd docs && sed -i "s/old/new/" guide/index.md && cat ../README.md > notes.txt')
    expect(e.writes.map((w) => w.path)).toEqual(['docs/guide/index.md', 'docs/notes.txt'])
    expect(e.reads).toEqual(['README.md'])
    expect(readShellCommand('cd /srv/app && rm build/out.js').writes.map((w) => w.path)).toEqual(['/srv/app/build/out.js'])
    // a place the reader cannot know ends the tracking: the paths stay as written
    expect(readShellCommand('cd "$WORK" && rm out.js').writes.map((w) => w.path)).toEqual(['out.js'])
  })

  it('joins a line continuation: no empty word, the files named on the later lines', () => {
    const e = readShellCommand("sed -i \\\n  -e 's/a/b/' \\\n  -e 's/c/d/' \\\n  src/config.py src/settings.py")
    expect(e.writes.map((w) => w.path)).toEqual(['src/config.py', 'src/settings.py'])
    expect(e.writes.every((w) => w.path !== '')).toBe(true)
  })
})
