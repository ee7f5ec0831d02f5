import { sliceHead } from './clip.js'
/**
 * Why a command failed, and which tests fail, read from tool outputs across languages and runners.
 * A traceback's frames say where; its last line says why, and that line is the one a summary keeps.
 */
import { at } from './at.js'

/**
 * Lines that say why: an exception or assertion (Python, Java, JS), pytest's `E` lines, compiler and
 * runner errors (`error:`, `error[E0425]:`, `error TS2345:`, `--- FAIL:`, `FAILED`, `panic:`), shell
 * failures (`command not found`, `No such file or directory`), and tool errors (`Error: ...`).
 */
export const WHY_LINE = new RegExp(
  [
    '^\\s*(?:[A-Za-z_][\\w.]*\\.)?[A-Z]\\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning)\\b(?::.*)?$',
    '^E\\s{2,}\\S',
    '^\\s*(?:error|fatal|panic)(?:\\[\\w+\\])?:',
    '^\\s*.*\\berror TS\\d+:',
    '^\\s*.*:\\d+(?::\\d+)?: (?:fatal )?error\\b',
    '^\\s*--- FAIL:',
    '^\\s*(?:FAILED|FAIL|ERROR)[: ]\\s*\\S',
    '^\\s*(?:✕|×|✗|●)\\s+\\S',
    '^\\s*npm ERR!',
    '^\\s*thread .* panicked at',
    '^\\s*AssertionError\\b',
    '^\\s*assert\\b.*(?:==|!=|is not|not in)',
    'command not found|No such file or directory|Permission denied|ModuleNotFoundError|cannot find module|is not defined',
    '^\\s*Error:'
  ].join('|'),
  'i'
)

/**
 * Words one of which every line WHY_LINE takes holds (each of its alternatives needs one): a line without
 * any is passed over at the cost of one quick scan, and most lines of an output have none.
 */
export const WHY_HINT =
  /error|exception|exit|interrupt|fail|warning|fatal|panic|err!|assert|✕|×|✗|●|not found|no such file|permission denied|cannot find module|is not defined|^e\s\s/i

/** Lines that only locate (frames) or frame the output (harness tags, rules of = and _). */
const NOISE_LINE =
  /^\s*(?:File "[^"]+", line \d+|at .+[:(]\d+:\d+\)?$|<\/?[\w_-]+>|<returncode>.*<\/returncode>|\[Command finished with exit code -?\d+\]|[-=_*]{5,}.*[-=_*]{5,}|[-=_]{5,})\s*$/
/** A traceback starts here; the first non-indented line after its frames is the exception. */
const TRACEBACK_START = /^\s*Traceback \(most recent call last\):/
const SHORT = 300

function short(line: string): string {
  const t = line.trim()
  return t.length > SHORT ? `${sliceHead(t, SHORT)}…` : t
}

/**
 * The lines of an output that say why it failed, at most `limit`: every traceback's exception line
 * first (the last of them kept when there are too many), then other lines that say why, in order.
 */
export function whyLines(output: string, limit: number): string[] {
  const lines = output.split('\n')
  const exceptions: string[] = []
  const others: string[] = []
  let inTraceback = false
  for (const line of lines) {
    if (TRACEBACK_START.test(line)) {
      inTraceback = true
      continue
    }
    if (inTraceback) {
      // Frames and their source lines are indented; the exception line is not.
      if (/^\s/.test(line) || line.trim() === '') continue
      inTraceback = false
      if (!NOISE_LINE.test(line) && !line.startsWith('During handling')) exceptions.push(short(line))
      continue
    }
    if (!WHY_HINT.test(line) || NOISE_LINE.test(line)) continue
    if (WHY_LINE.test(line)) others.push(short(line))
  }
  const unique = (xs: string[]): string[] => [...new Set(xs)]
  const ex = unique(exceptions)
  const keptExceptions = ex.length > limit ? ex.slice(ex.length - limit) : ex
  return unique([...keptExceptions, ...unique(others).filter((l) => !keptExceptions.includes(l))]).slice(0, limit)
}

/** Programs whose exit code 1 with no output means "nothing matched", not a failure. */
const SEARCHES = /^(?:grep|egrep|fgrep|rg|ag|ack|find|fd|locate|test|\[|\[\[|ls|which|command|type|git grep|git diff|diff|cmp)\b/

/** What an output says besides the harness's own framing of it. */
function substance(output: string): string {
  return output
    .split('\n')
    .filter((l) => !NOISE_LINE.test(l))
    .join('\n')
    .trim()
}

/** What a client writes around a failed command that printed nothing: its progress line and a bare "Error". */
const CLIENT_ERROR_WORDS = /^[ \t]*(?:Waiting…|Running…|(?:Error: )?Error|Exit code 1)[ \t]*$/gm
const CLIENT_ERROR_ONLY = /^\s*(?:(?:Waiting…|Running…|(?:Error: )?Error|Exit code 1)\s*)*$/

/**
 * A search that matched nothing (grep, rg, find, `test -f`, `[ -f x ]`, diff with no differences
 * shown): exit 1 and no output. The last stage of a pipeline decides; `cd dir &&` prefixes are skipped.
 */
export function isEmptySearch(command: string, output: string, exitCode: number | undefined, flaggedError = false): boolean {
  // A client that reports no exit status flags the result an error instead (Claude Code: "Error: Error"
  // under its progress line): with nothing else printed, that is the search's exit 1.
  const exit = exitCode ?? (flaggedError && output.length <= 200 && CLIENT_ERROR_ONLY.test(output) ? 1 : undefined)
  if (exit !== 1 || substance(output.replace(CLIENT_ERROR_WORDS, '')) !== '') return false
  const stages = command
    .split(/\|\||&&|;|\|/)
    .map((s) => s.trim())
    .filter(Boolean)
  const last = stages[stages.length - 1] ?? ''
  const first = stages.find((s) => !/^cd\b/.test(s)) ?? ''
  return SEARCHES.test(last.replace(/^(?:sudo|command|time)\s+/, '')) || SEARCHES.test(first)
}

export type TestStatus = 'failed' | 'passed'

export interface TestResult {
  id: string
  status: TestStatus
  /** The runner's reason for a failure, when it gives one on the same line. */
  reason?: string
}

/** Test ids and their status, in the shapes pytest, unittest, Jest/Vitest, go test and cargo test print. */
const TEST_LINES: { pattern: RegExp; read: (m: RegExpExecArray) => TestResult | undefined }[] = [
  // pytest short summary: FAILED tests/test_x.py::test_y - AssertionError: ...
  { pattern: /^(FAILED|ERROR) (\S+::\S+?)(?: - (.+))?$/, read: (m) => ({ id: at(m, 2), status: 'failed', ...(m[3] ? { reason: m[3] } : {}) }) },
  // pytest -v: tests/test_x.py::test_y PASSED [ 10%]
  {
    pattern: /^(\S+::\S+) (PASSED|FAILED|ERROR|XPASS)\b/,
    read: (m) => ({ id: at(m, 1), status: m[2] === 'PASSED' || m[2] === 'XPASS' ? 'passed' : 'failed' })
  },
  // unittest: FAIL: test_y (module.TestX)   /   test_y (module.TestX) ... ok
  // (Python 3.11 puts the method in the parentheses too: `test_y (module.TestX.test_y)`)
  { pattern: /^(FAIL|ERROR): (\w+) \(([\w.]+)\)/, read: (m) => ({ id: unittestId(at(m, 3), at(m, 2)), status: 'failed' }) },
  {
    pattern: /^(\w+) \(([\w.]+)\)(?: \S.*)? \.\.\. (ok|FAIL|ERROR)$/,
    read: (m) => ({ id: unittestId(at(m, 2), at(m, 1)), status: m[3] === 'ok' ? 'passed' : 'failed' })
  },
  // go test: --- FAIL: TestX (0.00s)
  { pattern: /^\s*--- (FAIL|PASS): (\S+)/, read: (m) => ({ id: at(m, 2), status: m[1] === 'PASS' ? 'passed' : 'failed' }) },
  // cargo test: test module::name ... FAILED
  { pattern: /^test (\S+) \.\.\. (ok|FAILED)$/, read: (m) => ({ id: at(m, 1), status: m[2] === 'ok' ? 'passed' : 'failed' }) },
  // Jest / Vitest: ✕ name (3 ms)   ✓ name
  { pattern: /^\s*(?:✕|×|✗) (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$/, read: (m) => ({ id: at(m, 1).trim(), status: 'failed' }) },
  { pattern: /^\s*(?:✓|√) (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$/, read: (m) => ({ id: at(m, 1).trim(), status: 'passed' }) }
]

function unittestId(where: string, name: string): string {
  return where === name || where.endsWith(`.${name}`) ? where : `${where}.${name}`
}

/**
 * Whether a line can be one of TEST_LINES at all: each of them starts with F, E or `test `, or holds
 * `::`, ` ... `, `--- ` or a runner's mark. Most lines of an output are none of these.
 */
export function mayReportTest(line: string): boolean {
  const first = line.charCodeAt(0)
  return (
    first === 70 /* F */ ||
    first === 69 /* E */ ||
    line.startsWith('test ') ||
    line.includes('::') ||
    line.includes(' ... ') ||
    line.includes('--- ') ||
    TEST_MARK.test(line)
  )
}
const TEST_MARK = /[✕×✗✓√]/

/** A quick look for any runner's word or mark (made once: a pattern written in a function is a new object at every call). */
const MAY_HOLD_TESTS = /PASS|FAIL|ERROR|\.\.\. ok|✓|✕|×|✗|√/

const NO_TESTS: readonly TestResult[] = Object.freeze([])

/** Every test result an output reports, in order. */
export function testResults(output: string): readonly TestResult[] {
  // most outputs report no test at all: one quick look before reading them line by line (and no new list)
  if (!MAY_HOLD_TESTS.test(output)) return NO_TESTS
  const out: TestResult[] = []
  for (const raw of output.split('\n')) {
    if (!mayReportTest(raw)) continue
    const line = raw.trimEnd()
    if (line.length > 500) continue
    for (const { pattern, read } of TEST_LINES) {
      const m = pattern.exec(line)
      if (!m) continue
      const r = read(m)
      if (r) out.push(r)
      break
    }
  }
  return out.some((r) => r.status === 'failed' && (r.reason === undefined || r.reason.endsWith('...'))) ? withWholeReasons(out, output) : out
}

/** An exception line as runners print it under a failure: pytest's `E   X: …`, a traceback's last line. */
const REASON_LINE = /^(?:E\s+)?((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Failure|Exit)\b.*)$/
/** A pytest section header (`____ test_name ____`) or a unittest block's rule (`=====`, `-----`). */
const SECTION = /^(?:_{3,} (.+?) _{3,}|={5,}|-{5,})\s*$/

/**
 * Failing tests given their whole reason line: one the runner's summary cut (pytest's `- Index...`) is
 * completed from the line it was cut from; one with none takes the first exception line of its own
 * section of the output (pytest's `____ name ____`, unittest's `FAIL: name (…)` block).
 */
function withWholeReasons(results: readonly TestResult[], output: string): TestResult[] {
  const lines = output.split('\n')
  // the first exception line of each section, by the section's name (and by unittest's header line)
  const reasons = new Map<string, string>()
  let section: string | undefined
  for (const raw of lines) {
    const line = raw.trimEnd()
    const header = SECTION.exec(line)
    const unittest = /^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)/.exec(line)
    if (header) {
      if (header[1]) section = header[1].trim() // a rule alone (unittest's) leaves the block it is in
    } else if (unittest) section = unittestId(at(unittest, 2), at(unittest, 1))
    else if (section !== undefined && !reasons.has(section)) {
      const m = REASON_LINE.exec(line.trim())
      if (m) reasons.set(section, m[1] ?? '')
    }
  }
  // the exception lines, as the summary line was cut from one of them
  const candidates = lines.map((l) => l.trim().replace(/^E\s+/, '')).filter((l) => REASON_LINE.test(l))
  return results.map((r) => {
    if (r.status !== 'failed') return r
    if (r.reason?.endsWith('...')) {
      const cut = r.reason.slice(0, -3).trimEnd()
      const whole = candidates.find((l) => l.length > cut.length && l.startsWith(cut))
      return whole ? { ...r, reason: whole } : r
    }
    const name = r.id.slice(Math.max(r.id.lastIndexOf('::') + 2, r.id.lastIndexOf('.') + 1))
    const reason = reasons.get(r.id) ?? reasons.get(name) ?? [...reasons].find(([k]) => k.endsWith(`.${name}`))?.[1]
    return reason ? { ...r, reason } : r
  })
}
