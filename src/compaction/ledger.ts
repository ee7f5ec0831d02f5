import { toolRule } from './catalog.js'
import { isServiceText } from './markers.js'
import { patchFiles, readShellCommand } from './shell.js'
import { exitCodeOf, signalLines } from './signal.js'
import { type Message, type ToolResultBlock, type ToolUseBlock, blocksOf, isPromptMessage, isTextBlock, isToolResult, isToolUse, toolResultText } from './types.js'

export interface FileChange {
  path: string
  /** What was done to it, in order, without repeats. */
  how: string[]
}

export interface CommandRun {
  message_index: number
  tool: string
  command: string
  outcome: 'ok' | 'error' | 'pending'
  exit_code?: number
}

export interface ErrorSeen {
  message_index: number
  tool: string
  /** The call that failed, shortened, and the lines of its output that say why. */
  call: string
  lines: string[]
}

export interface UserRequest {
  message_index: number
  text: string
}

/** Facts read deterministically out of the span: what the summary must not lose. */
export interface Ledger {
  filesModified: FileChange[]
  filesRead: string[]
  commands: CommandRun[]
  errors: ErrorSeen[]
  userRequests: UserRequest[]
}

export const ERROR_SIGNAL_LINES = 6

/** The user's own words in a prompt message: its text, less the service's summary and note blocks. */
export function userText(message: Message): string {
  return blocksOf(message)
    .filter(isTextBlock)
    .map((b) => b.text)
    .filter((t) => !isServiceText(t))
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
  const oneLine = text.split('\n')[0]!
  return oneLine.length > 200 ? `${oneLine.slice(0, 200)}…` : oneLine + (text.includes('\n') ? ' …' : '')
}

/** Reads the ledger out of `messages`; `offset` is the index of messages[0] in the client's history. */
export function readLedger(messages: readonly Message[], offset = 0): Ledger {
  const modified = new Map<string, FileChange>()
  const read = new Set<string>()
  const commands: CommandRun[] = []
  const errors: ErrorSeen[] = []
  const userRequests: UserRequest[] = []
  const heredocs = new Map<string, string>()
  let openFile: string | undefined

  const modify = (path: string, how: string): void => {
    const entry = modified.get(path) ?? { path, how: [] }
    if (!entry.how.includes(how)) entry.how.push(how)
    modified.set(path, entry)
  }

  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (isPromptMessage(message)) {
      const text = userText(message)
      if (text) userRequests.push({ message_index: offset + i, text })
      continue
    }
    if (message.role !== 'assistant') continue
    const results = new Map<string, ToolResultBlock>()
    const next = messages[i + 1]
    if (next?.role === 'user') for (const b of blocksOf(next)) if (isToolResult(b)) results.set(b.tool_use_id, b)

    for (const use of blocksOf(message).filter(isToolUse)) {
      const result = results.get(use.id)
      const output = result ? toolResultText(result) : ''
      const exit = result ? exitCodeOf(output) : undefined
      const failed = result !== undefined && (result.is_error === true || (exit !== undefined && exit !== 0))
      const rule = toolRule(use.name)
      const path = stringField(use.input, rule?.pathFields)

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
          commands.push({
            message_index: offset + i,
            tool: use.name,
            command: command.length > 2_000 ? `${command.slice(0, 2_000)}…` : command,
            outcome: result === undefined ? 'pending' : failed ? 'error' : 'ok',
            ...(exit !== undefined ? { exit_code: exit } : {})
          })
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
        errors.push({ message_index: offset + i + 1, tool: use.name, call: describeCall(use), lines: signalLines(output, ERROR_SIGNAL_LINES) })
      }
    }
  }
  const filesModified = [...modified.values()]
  const filesRead = [...read].filter((p) => !modified.has(p))
  return { filesModified, filesRead, commands, errors, userRequests }
}
