import { sliceHead } from './clip.js'
import { toolRule } from './catalog.js'
import { isServiceText } from './markers.js'
import { withoutClientEchoes } from './echoes.js'
import { foreignSummary, isHarnessContext } from './context.js'
import { patchFiles, readShellCommand } from './shell.js'
import { type TestStatus, isEmptySearch, testResults, whyLines } from './failures.js'
import { exitCodeOf } from './signal.js'
import { requestShape, saysAnything } from './requests.js'
import { type CommonText, HARNESS_MENTION, usersWords } from './harness.js'
import { lastIntention, statedPlan as readPlan } from './intent.js'
import {
  type Block,
  type Message,
  type ToolResultBlock,
  type ToolUseBlock,
  blocksOf,
  isPromptMessage,
  isTextBlock,
  isToolResult,
  isToolUse,
  toolResultText
} from './types.js'
import { at } from './at.js'

export interface FileChange {
  path: string
  /** What was done to it, in order, without repeats. */
  how: string[]
}

export interface CommandRun {
  message_index: number
  tool: string
  command: string
  /** `no_match`: a search that found nothing (exit 1, no output), which is not a failure. */
  outcome: 'ok' | 'error' | 'pending' | 'no_match'
  exit_code?: number
  /** For a run that exited 0 but printed failure lines (a test or script that shows a bug): those lines. */
  shows?: string[]
}

/** A run that exited 0 and printed what fails: a finding (a bug reproduced), not an error of the run. */
export interface Finding {
  message_index: number
  call: string
  lines: string[]
  /** A later run of the same command printed none of it. */
  gone: boolean
  /** Its exit status, where the history holds one (a Chat Completions tool output holds none). */
  exit_code?: number
}

export interface ErrorSeen {
  /** Where it was last seen. */
  message_index: number
  tool: string
  /** The call that failed, shortened, and the lines of its output that say why. */
  call: string
  lines: string[]
  /** How many times the same call failed the same way. */
  count: number
  /** A later run of the same call succeeded and printed no failure: the error is gone. */
  resolved: boolean
  /** A later run of the same call exited 0 but printed a failure (a finding): this error is past, not fixed. */
  superseded?: boolean
  /** That later run's exit status, where the history holds one. */
  superseded_exit_code?: number
}

export interface TestSeen {
  id: string
  /** The latest status the span reports. */
  status: TestStatus
  /** Why it failed, when a runner said so on the line. */
  reason?: string
  /** It failed at some point in the span (only such tests are listed). */
  failedOnce: boolean
}

export interface TodoItem {
  content: string
  status: string
}

export interface UserRequest {
  message_index: number
  text: string
  /** Its shape (requestShape), read once: the summary's steps compare requests by it many times. */
  shape: string
}

/** Facts read deterministically out of the span: what the summary must not lose. */
export interface Ledger {
  filesModified: FileChange[]
  filesRead: string[]
  commands: CommandRun[]
  errors: ErrorSeen[]
  userRequests: UserRequest[]
  /** Requests that only acknowledged ("yes", "1", "ok"), folded into one line of the summary. */
  acknowledgements: string[]
  /** Tests the span saw fail, with their latest status. */
  tests: TestSeen[]
  /** The agent's latest to-do list (a TodoWrite call), as it stood. */
  todos: TodoItem[]
  /** Runs that exited 0 and printed failures, the latest of each command. */
  findings: Finding[]
  /** Calls the user rejected (not errors: a choice). */
  rejected: string[]
  /** The latest plan the agent laid out as a list in its text. */
  statedPlan: string[]
  /** The last sentence in which the agent said what it would do. */
  intention?: string
}

export const ERROR_SIGNAL_LINES = 4

/**
 * The user's own words in a prompt message: its text, less the service's summary and note blocks, the
 * harness's context (carried over verbatim, never a request) and what the client echoed into it (a slash
 * command's output, a local command's: echoes.ts).
 */
export function userText(message: Message): string {
  return blocksOf(message)
    .filter(isTextBlock)
    .map((b) => b.text)
    .filter((t) => !isServiceText(t) && !isHarnessContext(t))
    .map(withoutClientEchoes)
    .filter((t) => t !== '')
    .join('\n')
    .trim()
}

function stringField(input: unknown, fields: readonly string[] | undefined): string | undefined {
  if (!fields || typeof input !== 'object' || input === null) return undefined
  for (const f of fields) {
    const v = (input as Record<string, unknown>)[f]
    if (typeof v === 'string' && v.trim() !== '') return v.trim()
    const line = Array.isArray(v) ? commandLine(v) : undefined
    if (line) return line
  }
  return undefined
}

/** A command given as its arguments (Codex's `["bash", "-lc", "cargo test"]`): the script a shell runs, else the words joined. */
export function commandLine(argv: readonly unknown[]): string | undefined {
  if (argv.length === 0 || !argv.every((a): a is string => typeof a === 'string')) return undefined
  const [program, flag, script] = argv
  if (argv.length === 3 && /(^|\/)(ba|z|da|k)?sh$/.test(program ?? '') && /^-l?c$/.test(flag ?? '') && script?.trim()) return script.trim()
  return argv.join(' ').trim() || undefined
}

function describeCall(use: ToolUseBlock): string {
  const command = stringField(use.input, ['command', 'cmd', 'script'])
  const path = stringField(use.input, ['file_path', 'path', 'filename'])
  const text = command ?? (path ? `${use.name} ${path}` : `${use.name} ${JSON.stringify(use.input ?? {})}`)
  const oneLine = text.split('\n', 1)[0] ?? ''
  return oneLine.length > 200 ? `${sliceHead(oneLine, 200)}…` : oneLine + (text.includes('\n') ? ' …' : '')
}

/**
 * Reads the ledger out of `messages`; `offset` is the index of messages[0] in the client's history;
 * `common` tells text the same key's other conversations sent (harness text, left out of the requests).
 */
export function readLedger(messages: readonly Message[], offset = 0, common?: CommonText): Ledger {
  const modified = new Map<string, FileChange>()
  const read = new Set<string>()
  const commands: CommandRun[] = []
  const errors: ErrorSeen[] = []
  const rejected: string[] = []
  const userRequests: UserRequest[] = []
  const heredocs = new Map<string, string>()
  const tests = new Map<string, TestSeen>()
  let todos: TodoItem[] = []
  let openFile: string | undefined

  const modify = (path: string, how: string): void => {
    const entry = modified.get(path) ?? { path, how: [] }
    if (!entry.how.includes(how)) entry.how.push(how)
    modified.set(path, entry)
  }

  // A summary another agent wrote of its earlier turns, at the start: its question asked for it, not for work.
  const prior = offset === 0 ? foreignSummary(messages) : undefined
  for (let i = 0; i < messages.length; i++) {
    const message = at(messages, i)
    if (isPromptMessage(message)) {
      if (i === prior?.question) continue
      const text = userText(message)
      if (text) userRequests.push({ message_index: offset + i, text, shape: '' })
      continue
    }
    if (message.role !== 'assistant') continue
    const next = messages[i + 1]
    const answers = next?.role === 'user' ? stepResults(blocksOf(next)) : undefined

    for (const use of blocksOf(message)) {
      if (!isToolUse(use)) continue
      const result = answers?.nextResult(use.id)
      const output = result ? toolResultText(result) : ''
      const exit = result ? exitCodeOf(output) : undefined
      if (result !== undefined && ((result.is_error === true && REJECTED.test(output)) || (output.length <= 500 && REJECTED_ONLY.test(output)))) {
        rejected.push(describeCall(use))
        continue
      }
      const failed =
        result !== undefined && (result.is_error === true || (exit !== undefined && exit !== 0) || (exit === undefined && KILLED.test(output.slice(0, 300))))
      const rule = toolRule(use.name)
      const path = stringField(use.input, rule?.pathFields)
      const found = testResults(output)
      for (let k = 0; k < found.length; k++) {
        const t = at(found, k)
        const prior = tests.get(t.id)
        const failedOnce = (prior?.failedOnce ?? false) || t.status === 'failed'
        tests.set(t.id, {
          id: t.id,
          status: t.status,
          failedOnce,
          ...(t.reason ? { reason: t.reason } : prior?.reason && t.status === 'failed' ? { reason: prior.reason } : {})
        })
      }
      const list = todoList(use)
      if (list) todos = list

      switch (rule?.kind) {
        case 'write': {
          const target = path ?? openFile
          if (target && !failed) modify(target, use.name)
          if (path) openFile = path
          break
        }
        case 'open':
        case 'read':
          if (path) {
            read.add(path)
            if (rule.kind === 'open') openFile = path
          }
          break
        case 'editor': {
          const sub = stringField(use.input, [rule.commandField ?? 'command'])
          if (path && sub && rule.writes?.includes(sub) && !failed) modify(path, `${use.name} ${sub}`)
          else if (path && sub && rule.reads?.includes(sub)) read.add(path)
          break
        }
        case 'patch': {
          const patch = stringField(use.input, rule.textFields)
          if (patch && !failed) for (const f of patchFiles(patch)) modify(f, use.name)
          break
        }
        case 'shell': {
          const command = stringField(use.input, rule.textFields)
          if (!command) break
          const noMatch = failed && isEmptySearch(command, output, exit, result?.is_error === true)
          const shows = result !== undefined && !failed && RUNS_CODE.test(command) ? failureLines(output) : []
          commands.push({
            message_index: offset + i,
            tool: use.name,
            command: command.length > 2_000 ? `${sliceHead(command, 2_000)}…` : command,
            outcome: result === undefined ? 'pending' : noMatch ? 'no_match' : failed ? 'error' : 'ok',
            ...(exit !== undefined ? { exit_code: exit } : {}),
            ...(shows.length > 0 ? { shows } : {})
          })
          if (noMatch) continue
          if (failed) break
          const effects = readShellCommand(command)
          for (const h of effects.heredocs) if (h.path) heredocs.set(h.path, h.body)
          // A script written earlier in the span and run now does what its own lines say.
          const scripts = effects.runs.flatMap((r) => {
            const body = heredocs.get(r)
            return body === undefined ? [] : [readShellCommand(body)]
          })
          for (const e of [effects, ...scripts]) {
            for (const w of e.writes) modify(w.path, w.how)
            for (const r of e.reads) read.add(r)
            for (const a of e.applies) {
              const body = a.body ?? (a.source ? heredocs.get(a.source) : undefined)
              if (body) for (const f of patchFiles(body)) modify(f, 'patched (git apply / patch)')
            }
          }
          break
        }
        default:
          break
      }
      if (failed) {
        errors.push({
          message_index: offset + i + 1,
          tool: use.name,
          call: describeCall(use),
          lines: whyLines(output, ERROR_SIGNAL_LINES),
          count: 1,
          resolved: false
        })
      }
    }
  }
  const { plan: statedPlan, intention } = agentsWords(messages)
  const spell = spelling([...modified.keys(), ...read], commands)
  const filesModified = spell ? respelledChanges(modified, spell) : [...modified.values()]
  const changed = spell ? new Set(filesModified.map((f) => f.path)) : modified
  const reads = spell ? new Set([...read].map(spell).filter((p): p is string => p !== undefined)) : read
  // Made at its size at once when nothing was modified: a list grown by pushes is copied as it grows.
  const filesRead = changed.size === 0 && !spell ? [...reads] : [...reads].filter((p) => !changed.has(p))
  const failedTests = [...tests.values()].filter((t) => t.failedOnce)
  const { requests, acknowledgements } = usersRequests(userRequests, common)
  return {
    filesModified,
    filesRead,
    commands,
    errors: mergeErrors(errors, commands),
    findings: findingsOf(commands),
    rejected,
    userRequests: requests,
    acknowledgements,
    tests: failedTests,
    todos,
    statedPlan,
    ...(intention ? { intention } : {})
  }
}

/** A request that is only lines naming harness text left out: the one place that text is named. */
function onlyMentions(text: string): boolean {
  return text.split('\n').every((l) => l.trim() === '' || HARNESS_MENTION.test(l.trim()))
}

/** Short replies that only acknowledge or pick an option: a few characters, at most one word of content. */
function isAcknowledgement(text: string): boolean {
  return text.length <= 40 && !/\n/.test(text) && (text.match(/[\p{L}\p{N}_]{3,}/gu) ?? []).length <= 1
}

/** The requests in the user's words (harness text named once, not copied), acknowledgements apart. */
function usersRequests(raw: readonly UserRequest[], common: CommonText | undefined): { requests: UserRequest[]; acknowledgements: string[] } {
  const words = usersWords(
    raw.map((r) => r.text),
    common
  )
  const requests: UserRequest[] = []
  const acknowledgements: string[] = []
  raw.forEach((r, k) => {
    const text = words[k] ?? ''
    if (text === '') return
    // folded: a short acknowledgement, or only a client's echo lines (`/cmd is running…`, markers)
    if (isAcknowledgement(text) || (!saysAnything(text) && !onlyMentions(text))) acknowledgements.push(text)
    else requests.push({ message_index: r.message_index, text, shape: requestShape(text) })
  })
  return { requests, acknowledgements }
}

/**
 * A step's tool results, looked up by the call they answer, asked once per call in the order the calls
 * were made. Clients answer parallel calls in that order, so the nth call's answer is looked for at the
 * nth result first, found by a cursor that walks the blocks once; a map of all of them is made only when
 * that guess misses. (At 50,000 parallel calls a map, or even a list of the results, took megabytes of
 * fresh memory on every compaction.) A history the service accepts answers each call once, so the guess
 * and the map agree.
 */
function stepResults(blocks: readonly Block[]): { nextResult: (id: string) => ToolResultBlock | undefined } {
  let cursor = 0
  let byId: Map<string, ToolResultBlock> | undefined
  return {
    nextResult: (id) => {
      while (cursor < blocks.length && !isToolResult(at(blocks, cursor))) cursor++
      const guess = blocks[cursor++]
      if (guess !== undefined && isToolResult(guess) && guess.tool_use_id === id) return guess
      byId ??= new Map(blocks.filter(isToolResult).map((r) => [r.tool_use_id, r]))
      return byId.get(id)
    }
  }
}

/** The same call failing the same way (numbers aside) is one error with a count; one that later succeeded is resolved. */
function mergeErrors(errors: readonly ErrorSeen[], commands: readonly CommandRun[]): ErrorSeen[] {
  const shape = (e: ErrorSeen): string => `${e.call}\n${e.lines.join('\n')}`.replace(/0x[0-9a-f]+|\d+(?:\.\d+)?/gi, '#')
  const merged = new Map<string, ErrorSeen>()
  for (const e of errors) {
    const key = shape(e)
    const prior = merged.get(key)
    if (prior) merged.delete(key) // the newest place stands, so the list stays in the order things last happened
    merged.set(key, prior ? { ...e, count: prior.count + 1 } : e)
  }
  // A failed call is resolved when the same call (first line) later ran without failing and printed no
  // failure: an exit code of 0 alone proves nothing (a script that prints FAIL exits 0).
  const lastOk = new Map<string, CommandRun>()
  for (const c of commands) if (c.outcome === 'ok') lastOk.set(firstLine(c.command), c)
  return [...merged.values()].map((e) => {
    const run = lastOk.get(firstLine(e.call.replace(/ …$/, '')))
    if (run === undefined || run.message_index < e.message_index) return e
    // a later run that exits 0 but still prints a failure has not resolved it: it supersedes it
    return run.shows === undefined
      ? { ...e, resolved: true }
      : { ...e, superseded: true, ...(run.exit_code !== undefined ? { superseded_exit_code: run.exit_code } : {}) }
  })
}

/** How many of the agent's newest messages are read for its plan and intention: an older plan is stale. */
const AGENT_TEXTS_READ = 40

/**
 * The latest plan the agent laid out and the last intention it stated, read from its newest text back,
 * stopping once both are found (only the latest of each counts).
 */
function agentsWords(messages: readonly Message[]): { plan: string[]; intention?: string } {
  let plan: string[] | undefined
  let intention: string | undefined
  let read = 0
  for (let i = messages.length - 1; i >= 0 && (plan === undefined || intention === undefined) && read < AGENT_TEXTS_READ; i--) {
    const m = at(messages, i)
    if (m.role !== 'assistant') continue
    read++
    const blocks = blocksOf(m)
    for (let k = blocks.length - 1; k >= 0 && (plan === undefined || intention === undefined); k--) {
      const b = at(blocks, k)
      if (!isTextBlock(b)) continue
      plan ??= readPlan(b.text)
      intention ??= lastIntention(b.text)
    }
  }
  return { plan: plan ?? [], ...(intention ? { intention } : {}) }
}

/** A harness's word that the command did not finish (no exit code then): it did not succeed. */
const KILLED = /\b(?:timed out|was killed|has been killed|terminated after)\b/i

/**
 * A tool result that says the user refused the call: a choice, not an error. The clients' own words: Claude
 * Code ("The user doesn't want to proceed with this tool use", or its prompt's answer "No (tell Claude what to
 * do differently)"), opencode ("The user rejected permission to use this specific tool call"), Codex ("exec
 * command rejected by user"), Cline and Roo ("The user denied this operation"), Gemini CLI ("User did not
 * allow tool call").
 */
const REJECTED =
  /\b(?:user|you)\b[^.\n]{0,60}\b(?:rejected|denied|declined|(?:doesn't|does not|didn't|did not) (?:want to proceed|allow))\b|\brejected by (?:the )?user\b|\binterrupted by (?:the )?user\b|^[ \t]*No \(tell \w+ what to do differently\)/im
/** The same said as a client's whole answer, where a client flags nothing as an error (Codex's outputs carry no flag). */
const REJECTED_ONLY =
  /^\s*(?:Waiting…\s*)?(?:[\w ]*(?:command|patch|tool call|operation) (?:was )?rejected by (?:the )?user|No \(tell \w+ what to do differently\)|The user (?:rejected|denied|declined)[^\n]{0,120})\s*\.?\s*$/i

/** A command that runs code (a script, tests, a build), whose output may show a failure though it exits 0. */
const RUNS_CODE =
  /(?:^|&&|;|\|\||\()\s*(?:\w+=\S*\s+)*(?:python[\d.]*|pytest|py\.test|node|deno|bun|npm|npx|yarn|pnpm|go|cargo|make|tox|nox|ruby|rspec|java|mvn|gradle|dotnet|php|perl|bash|sh|\.\/\S+)\b/

const FAILURE_HINT = /fail|error|exception|assert|✗|✕|×/i

/** The lines of an output that say something fails (warnings and "0 errors" aside). */
function failureLines(output: string): string[] {
  if (!FAILURE_HINT.test(output)) return [] // one look: most runs print no failure at all
  return whyLines(output, ERROR_SIGNAL_LINES).filter(
    (l) => /fail|error|exception|assert|✗|✕|×/i.test(l) && !/\bwarning\b|\b(?:0|no) (?:errors?|failures?|failed)\b/i.test(l)
  )
}

/** The latest finding of each command, and whether a later run of it printed none of it. */
function findingsOf(commands: readonly CommandRun[]): Finding[] {
  const byCall = new Map<string, Finding>()
  for (const c of commands) {
    const key = firstLine(c.command)
    if (c.shows) {
      byCall.delete(key)
      byCall.set(key, {
        message_index: c.message_index,
        call: key.length > 200 ? `${sliceHead(key, 200)}…` : key,
        lines: c.shows,
        gone: false,
        ...(c.exit_code !== undefined ? { exit_code: c.exit_code } : {})
      })
    } else if (c.outcome === 'ok') {
      const f = byCall.get(key)
      if (f) f.gone = true
    }
  }
  return [...byCall.values()]
}

function firstLine(text: string): string {
  return (text.split('\n', 1)[0] ?? '').replace(/…$/, '').trim()
}

/** A TodoWrite-style call's list: `todos: [{content, status}]`. */
function todoList(use: ToolUseBlock): TodoItem[] | undefined {
  const todos = (use.input as { todos?: unknown } | null)?.todos
  if (!Array.isArray(todos)) return undefined
  const items: TodoItem[] = []
  for (const t of todos) {
    if (typeof t !== 'object' || t === null) continue
    const { content, status } = t as { content?: unknown; status?: unknown }
    if (typeof content === 'string' && content.trim() !== '') items.push({ content: content.trim(), status: typeof status === 'string' ? status : 'pending' })
  }
  return items
}

/** Something a files list should not hold: a glob, a config header, code, a quoted or spaced phrase. */
const NOT_A_PATH = /[\s*?[\]{}()<>=,;'"`|$]|^-|^\.+$/

/** The working directory the commands ran in: the most frequent `cd /abs/dir` target. */
function workingDirectory(commands: readonly CommandRun[]): string | undefined {
  const counts = new Map<string, number>()
  for (const c of commands) {
    const m = /^\s*cd\s+(\/[^\s;&|]+)/.exec(c.command)
    if (m?.[1]) counts.set(m[1].replace(/\/+$/, ''), (counts.get(m[1].replace(/\/+$/, '')) ?? 0) + 1)
  }
  let best: [string, number] | undefined
  for (const e of counts) if (!best || e[1] > best[1]) best = e
  return best?.[0]
}

/** The directory that most absolute paths put before a relative one the list also has: where the agent works. */
function pairedDirectory(paths: readonly string[], relative: readonly string[]): string | undefined {
  const rel = new Set(relative.map((r) => r.replace(/^\.\//, '')).filter((r) => r.includes('/')))
  if (rel.size === 0) return undefined
  const counts = new Map<string, number>()
  for (const p of paths) {
    if (!p.startsWith('/')) continue
    // each way of splitting p into a directory and a relative path the list holds
    for (let i = p.indexOf('/', 1); i > 0; i = p.indexOf('/', i + 1)) {
      if (rel.has(p.slice(i + 1))) counts.set(p.slice(0, i), (counts.get(p.slice(0, i)) ?? 0) + 1)
    }
  }
  let best: [string, number] | undefined
  for (const e of counts) if (!best || e[1] > best[1]) best = e
  return best?.[0]
}

/**
 * One spelling per file: relative to the working directory, an absolute path that another entry names
 * relatively is that entry; what is not a path (a glob, `[tool.section]`, a call) is left out. Undefined
 * when every path is already as it should be (the common case costs one scan).
 */
function spelling(paths: readonly string[], commands: readonly CommandRun[]): ((path: string) => string | undefined) | undefined {
  const relative = paths.filter((p) => !p.startsWith('/'))
  const cwd = workingDirectory(commands) ?? pairedDirectory(paths, relative)
  const needed = paths.some((p) => NOT_A_PATH.test(p) || p.startsWith('./') || (p.startsWith('/') && (cwd !== undefined || relative.length > 0)))
  if (!needed) return undefined
  // relative entries by their last part, so that an absolute path is matched against a few, not all
  const byName = new Map<string, string[]>()
  for (const r of relative) {
    const p = r.replace(/^\.\//, '')
    if (!p.includes('/')) continue
    const name = p.slice(p.lastIndexOf('/') + 1)
    const list = byName.get(name)
    if (list) list.push(p)
    else byName.set(name, [p])
  }
  return (path) => {
    if (NOT_A_PATH.test(path)) return undefined
    let p = path.replace(/^\.\//, '')
    if (cwd !== undefined && p.startsWith(`${cwd}/`)) p = p.slice(cwd.length + 1)
    if (p.startsWith('/')) {
      // the longest relative entry this absolute path ends with
      let best: string | undefined
      for (const r of byName.get(p.slice(p.lastIndexOf('/') + 1)) ?? []) if (p.endsWith(`/${r}`) && (!best || r.length > best.length)) best = r
      if (best) p = best
    }
    return p
  }
}

function respelledChanges(modified: ReadonlyMap<string, FileChange>, spell: (path: string) => string | undefined): FileChange[] {
  const out = new Map<string, FileChange>()
  for (const f of modified.values()) {
    const path = spell(f.path)
    if (path === undefined) continue
    const entry = out.get(path) ?? { path, how: [] }
    for (const h of f.how) if (!entry.how.includes(h)) entry.how.push(h)
    out.set(path, entry)
  }
  return [...out.values()]
}

/** The text of each prompt of `messages` as the user sent it (the service's blocks and carried context aside). */
export function promptTexts(messages: readonly Message[]): string[] {
  const out: string[] = []
  for (const m of messages) {
    if (!isPromptMessage(m)) continue
    const text = userText(m)
    if (text) out.push(text)
  }
  return out
}
