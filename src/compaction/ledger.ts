import { sliceHead } from './clip.js'
import { toolRule } from './catalog.js'
import { isServiceText } from './markers.js'
import { foreignSummary, isHarnessContext } from './context.js'
import { patchFiles, readShellCommand } from './shell.js'
import { type TestStatus, isEmptySearch, testResults, whyLines } from './failures.js'
import { exitCodeOf } from './signal.js'
import { requestShape } from './requests.js'
import { type Block, type Message, type ToolResultBlock, type ToolUseBlock, blocksOf, isPromptMessage, isTextBlock, isToolResult, isToolUse, toolResultText } from './types.js'
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
  /** The same call succeeded later in the span. */
  resolved: boolean
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
  /** Tests the span saw fail, with their latest status. */
  tests: TestSeen[]
  /** The agent's latest to-do list (a TodoWrite call), as it stood. */
  todos: TodoItem[]
}

export const ERROR_SIGNAL_LINES = 4

/**
 * The user's own words in a prompt message: its text, less the service's summary and note blocks and
 * the harness's context (carried over verbatim, never a request).
 */
export function userText(message: Message): string {
  return blocksOf(message)
    .filter(isTextBlock)
    .map((b) => b.text)
    .filter((t) => !isServiceText(t) && !isHarnessContext(t))
    .join('\n')
    .trim()
}

function stringField(input: unknown, fields: readonly string[] | undefined): string | undefined {
  if (!fields || typeof input !== 'object' || input === null) return undefined
  for (const f of fields) {
    const v = (input as Record<string, unknown>)[f]
    if (typeof v === 'string' && v.trim() !== '') return v.trim()
  }
  return undefined
}

function describeCall(use: ToolUseBlock): string {
  const command = stringField(use.input, ['command', 'cmd', 'script'])
  const path = stringField(use.input, ['file_path', 'path', 'filename'])
  const text = command ?? (path ? `${use.name} ${path}` : `${use.name} ${JSON.stringify(use.input ?? {})}`)
  const oneLine = text.split('\n', 1)[0] ?? ''
  return oneLine.length > 200 ? `${sliceHead(oneLine, 200)}…` : oneLine + (text.includes('\n') ? ' …' : '')
}

/** Reads the ledger out of `messages`; `offset` is the index of messages[0] in the client's history. */
export function readLedger(messages: readonly Message[], offset = 0): Ledger {
  const modified = new Map<string, FileChange>()
  const read = new Set<string>()
  const commands: CommandRun[] = []
  const errors: ErrorSeen[] = []
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
      if (text) userRequests.push({ message_index: offset + i, text, shape: requestShape(text) })
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
      const failed = result !== undefined && (result.is_error === true || (exit !== undefined && exit !== 0))
      const rule = toolRule(use.name)
      const path = stringField(use.input, rule?.pathFields)
      const found = testResults(output)
      for (let k = 0; k < found.length; k++) {
        const t = at(found, k)
        const prior = tests.get(t.id)
        const failedOnce = (prior?.failedOnce ?? false) || t.status === 'failed'
        tests.set(t.id, { id: t.id, status: t.status, failedOnce, ...(t.reason ? { reason: t.reason } : prior?.reason && t.status === 'failed' ? { reason: prior.reason } : {}) })
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
          const noMatch = failed && isEmptySearch(command, output, exit)
          commands.push({
            message_index: offset + i,
            tool: use.name,
            command: command.length > 2_000 ? `${sliceHead(command, 2_000)}…` : command,
            outcome: result === undefined ? 'pending' : noMatch ? 'no_match' : failed ? 'error' : 'ok',
            ...(exit !== undefined ? { exit_code: exit } : {})
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
        errors.push({ message_index: offset + i + 1, tool: use.name, call: describeCall(use), lines: whyLines(output, ERROR_SIGNAL_LINES), count: 1, resolved: false })
      }
    }
  }
  const filesModified = [...modified.values()]
  // Made at its size at once when nothing was modified: a list grown by pushes is copied as it grows.
  const filesRead = modified.size === 0 ? [...read] : [...read].filter((p) => !modified.has(p))
  const failedTests = [...tests.values()].filter((t) => t.failedOnce)
  return { filesModified, filesRead, commands, errors: mergeErrors(errors, commands), userRequests, tests: failedTests, todos }
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
  // A failed call is resolved when the same call (first line) later ran without failing.
  const lastOk = new Map<string, number>()
  for (const c of commands) if (c.outcome === 'ok') lastOk.set(firstLine(c.command), c.message_index)
  return [...merged.values()].map((e) => {
    const ok = lastOk.get(firstLine(e.call.replace(/ …$/, '')))
    return ok !== undefined && ok >= e.message_index ? { ...e, resolved: true } : e
  })
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
