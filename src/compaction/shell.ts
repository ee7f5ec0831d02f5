/**
 * Reads a shell command for the files it writes and reads. It is a reader of common shapes (sed -i,
 * redirections, tee, heredocs, mv/cp/rm, git apply, patch), not a shell: what it cannot read it leaves out.
 */
import { at } from './at.js'

export interface ShellEffects {
  writes: { path: string; how: string }[]
  reads: string[]
  /** Heredoc bodies written to files, by target path: a later `git apply FILE` reads its headers. */
  heredocs: { path: string | undefined; body: string }[]
  /** Patches applied (`git apply`, `patch`): their text when inline, else the file they came from. */
  applies: { source: string | undefined; body: string | undefined }[]
  /** Shell scripts the command runs (`./x.sh`, `bash x.sh`): a script written earlier is read too. */
  runs: string[]
}

interface Word {
  text: string
  op: boolean
}

/**
 * One token at a time: blanks, a single-quoted or double-quoted piece, an escaped character, an
 * operator, or a run of plain characters. Adjacent pieces make one word (`a"b c"d` is `ab cd`).
 */
const TOKEN = /[ \t]+|'([^']*)'?|"((?:\\[\s\S]|[^"\\])*)"?|\\([\s\S])|(&&|\|\||>>|&>|2>|<<|[;|><&()\n])|([^\s'"\\;|><&()]+)/y

/** Splits a command line into words and operators, honouring quotes and backslashes. */
function tokenize(line: string): Word[] {
  const out: Word[] = []
  let cur = ''
  let has = false
  TOKEN.lastIndex = 0
  let m: RegExpExecArray | null
  while (TOKEN.lastIndex < line.length && (m = TOKEN.exec(line)) !== null) {
    if (m[5] !== undefined) {
      cur += m[5]
      has = true
    } else if (m[1] !== undefined) {
      cur += m[1]
      has = true
    } else if (m[2] !== undefined) {
      cur += m[2].replace(/\\([\s\S])/g, '$1')
      has = true
    } else if (m[3] !== undefined) {
      // a line continuation joins lines; it is no word of its own
      if (m[3] !== '\n') {
        cur += m[3]
        has = true
      }
    } else {
      if (has) out.push({ text: cur, op: false })
      cur = ''
      has = false
      if (m[4] !== undefined) out.push({ text: m[4], op: true })
    }
  }
  if (has) out.push({ text: cur, op: false })
  return out
}

/** Removes heredoc bodies from a command, returning the command lines and the bodies. */
function splitHeredocs(command: string): { text: string; bodies: string[] } {
  const lines = command.split('\n')
  const kept: string[] = []
  const bodies: string[] = []
  for (let i = 0; i < lines.length; i++) {
    const line = at(lines, i)
    kept.push(line)
    const re = /<<(-?)\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)\2/g
    let m: RegExpExecArray | null
    while ((m = re.exec(line)) !== null) {
      const delimiter = at(m, 3)
      const body: string[] = []
      i++
      while (i < lines.length && (m[1] ? at(lines, i).trim() : lines[i]) !== delimiter) body.push(at(lines, i++))
      bodies.push(body.join('\n'))
    }
  }
  return { text: kept.join('\n'), bodies }
}

/** Files named by diff headers in a patch (unified or apply_patch format). */
export function patchFiles(patch: string): string[] {
  const out: string[] = []
  const re = /^(?:\+\+\+ (?:b\/)?(\S+)|\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|--- (?:a\/)?(\S+))/gm
  let m: RegExpExecArray | null
  while ((m = re.exec(patch)) !== null) {
    const path = (m[1] ?? m[2] ?? m[3] ?? '').trim()
    if (path && path !== '/dev/null' && !out.includes(path)) out.push(path)
  }
  return out
}

const NOT_FILES = new Set(['/dev/null', '/dev/stdout', '/dev/stderr', '-'])
const READERS = new Set(['cat', 'head', 'tail', 'less', 'more', 'nl', 'bat'])
const WRAPPERS = new Set(['sudo', 'time', 'nohup', 'command', 'exec', 'env'])

function looksLikeFile(word: string): boolean {
  return !word.startsWith('-') && !/[*?$`{}]/.test(word) && /[./]/.test(word) && !word.endsWith('/') && !/^\d+$/.test(word)
}

function operands(args: readonly string[]): string[] {
  return args.filter((a) => !a.startsWith('-'))
}

export function readShellCommand(command: string): ShellEffects {
  const effects: ShellEffects = { writes: [], reads: [], heredocs: [], applies: [], runs: [] }
  const { text, bodies } = splitHeredocs(command)
  const words = tokenize(text)
  let heredocIndex = 0

  let simple: string[] = []
  let redirectTargets: string[] = []
  let heredocHere = false
  // `cd dir &&` moves the commands after it: their relative paths are read against it
  let cwd = ''
  const finish = (): void => {
    const body = heredocHere ? bodies[heredocIndex++] : undefined
    const from = { writes: effects.writes.length, reads: effects.reads.length, heredocs: effects.heredocs.length, runs: effects.runs.length }
    for (const target of redirectTargets) {
      if (NOT_FILES.has(target) || target.startsWith('&')) continue
      effects.writes.push({ path: target, how: body !== undefined ? 'written from a heredoc' : 'written by shell redirection' })
    }
    if (body !== undefined) effects.heredocs.push({ path: redirectTargets[0], body })
    if (simple[0] === 'cd') cwd = changedDirectory(cwd, simple[1])
    else readSimple(simple, effects, body)
    if (cwd) {
      for (let k = from.writes; k < effects.writes.length; k++) at(effects.writes, k).path = inDirectory(cwd, at(effects.writes, k).path)
      for (let k = from.reads; k < effects.reads.length; k++) effects.reads[k] = inDirectory(cwd, at(effects.reads, k))
      for (let k = from.runs; k < effects.runs.length; k++) effects.runs[k] = inDirectory(cwd, at(effects.runs, k))
      for (let k = from.heredocs; k < effects.heredocs.length; k++) {
        const h = at(effects.heredocs, k)
        if (h.path !== undefined) h.path = inDirectory(cwd, h.path)
      }
    }
    simple = []
    redirectTargets = []
    heredocHere = false
  }

  for (let i = 0; i < words.length; i++) {
    const w = at(words, i)
    if (!w.op) {
      simple.push(w.text)
      continue
    }
    if (w.text === '>' || w.text === '>>' || w.text === '&>') {
      const target = words[i + 1]
      if (target && !target.op) redirectTargets.push(target.text)
      i++
    } else if (w.text === '2>' || w.text === '<') {
      const next = words[i + 1]
      if (w.text === '<' && next && !next.op) simple.push(`<${next.text}`)
      i++
    } else if (w.text === '<<') {
      heredocHere = true
      i++ // the delimiter
    } else if (w.text === '&' && words[i + 1]?.text === '>') {
      continue
    } else {
      finish()
    }
  }
  finish()
  return effects
}

function readSimple(argv: string[], effects: ShellEffects, heredocBody: string | undefined): void {
  let words = argv.filter((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w))
  while (words.length > 0 && WRAPPERS.has(at(words, 0))) words = words.slice(1)
  if (words[0] === 'timeout') words = words.slice(2)
  if (words.length === 0) return
  if (at(words, 0).startsWith('./') && at(words, 0).length > 2) effects.runs.push(at(words, 0).slice(2))
  const cmd = at(words, 0).split('/').pop() ?? ''
  const args = words.slice(1).filter((a) => !a.startsWith('<'))
  const stdin = words
    .slice(1)
    .find((a) => a.startsWith('<'))
    ?.slice(1)

  const write = (path: string, how: string): void => {
    if (!NOT_FILES.has(path)) effects.writes.push({ path, how })
  }
  switch (cmd) {
    case 'sed':
    case 'perl': {
      const inPlace = args.some((a) => /^-[a-zA-Z]*i/.test(a) || a.startsWith('--in-place'))
      const scripted = args.some((a) => a === '-e' || a === '-f' || a === '--expression')
      const files = operands(args.filter((_, k) => !(k > 0 && ['-e', '-f', '--expression'].includes(at(args, k - 1)))))
      const targets = scripted ? files : files.slice(1)
      if (inPlace) for (const f of targets) write(f, `edited in place with ${cmd}`)
      else for (const f of targets) if (looksLikeFile(f)) effects.reads.push(f)
      return
    }
    case 'tee':
      for (const f of operands(args)) write(f, heredocBody !== undefined ? 'written from a heredoc' : 'written with tee')
      return
    case 'mv': {
      const ops = operands(args)
      const dest = ops[ops.length - 1]
      for (const f of ops.slice(0, -1)) write(f, dest ? `moved to ${dest}` : 'moved')
      if (dest && ops.length > 1) write(dest, 'moved into place')
      return
    }
    case 'cp': {
      const ops = operands(args)
      if (ops.length > 1) write(at(ops, ops.length - 1), `copied from ${ops.slice(0, -1).join(', ')}`)
      return
    }
    case 'rm':
      for (const f of operands(args)) write(f, 'deleted')
      return
    case 'touch':
      for (const f of operands(args)) write(f, 'created (touch)')
      return
    case 'patch': {
      const source = stdin ?? args.find((_, k) => k > 0 && args[k - 1] === '-i')
      effects.applies.push({ source, body: heredocBody })
      return
    }
    case 'git':
      if (args[0] === 'apply' || args[0] === 'am') {
        const source = operands(args.slice(1))[0]
        effects.applies.push({ source, body: heredocBody })
      } else if (args[0] === 'checkout' && args.includes('--')) {
        for (const f of args.slice(args.indexOf('--') + 1)) write(f, 'restored with git checkout')
      }
      return
    case 'bash':
    case 'sh':
    case 'zsh':
    case 'source':
    case '.': {
      const script = operands(args)[0]
      if (script && !args.includes('-c')) effects.runs.push(script.replace(/^\.\//, ''))
      return
    }
    case 'grep':
    case 'rg':
    case 'egrep': {
      const ops = operands(args)
      const files = args.some((a) => a === '-e' || a === '-f') ? ops : ops.slice(1)
      for (const f of files) if (looksLikeFile(f)) effects.reads.push(f)
      return
    }
    default:
      if (READERS.has(cmd)) for (const f of operands(args)) if (looksLikeFile(f)) effects.reads.push(f)
  }
}

/** Where `cd target` leads from `cwd` ('' is where the command began): unknown places (`~`, `-`, `$VAR`) end the tracking. */
function changedDirectory(cwd: string, target: string | undefined): string {
  if (target === undefined || target === '' || /^[~$-]/.test(target)) return ''
  if (target.startsWith('/')) return normalized(target)
  return normalized(cwd ? `${cwd}/${target}` : target)
}

/** A path as seen from where the command began, when a `cd` moved it: relative ones joined to the directory. */
function inDirectory(cwd: string, path: string): string {
  if (path.startsWith('/') || path.startsWith('~') || path.startsWith('$')) return path
  return normalized(`${cwd}/${path}`)
}

/** `a/./b/../c` as `a/c`; a leading `..` that leaves the start is kept. */
function normalized(path: string): string {
  const absolute = path.startsWith('/')
  const out: string[] = []
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..' && out.length > 0 && out[out.length - 1] !== '..') out.pop()
    else if (part !== '..' || !absolute) out.push(part)
  }
  const joined = out.join('/')
  return absolute ? `/${joined}` : joined || '.'
}
