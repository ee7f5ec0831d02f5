/**
 * Facts of a removed span that a recall must find again, chosen by rules of their own (not the
 * cold layer's): a sentence late in an early long request, the line that says why a command failed,
 * a command. Each comes with a query of a few of its rarest words and the message it came from.
 */
import { type Message, isPromptMessage, isToolResult, isToolUse, toolResultText, userText } from '../src/compaction/index.js'

export interface Fact {
  kind:
    | 'late sentence of a request'
    | 'exception line'
    | 'command'
    | 'signal line of a command that succeeded'
    | 'later line of a multi-line command'
    | 'plain output line'
  text: string
  /**
   * The hit must hold the text itself (a part of an entry, not only its message); any entry that does
   * answers it (a command run several times is the same command each time).
   */
  inText?: true
  query: string
  /** A result answers the fact when its citation covers this message index. */
  message: number
}

function words(text: string): string[] {
  return text.toLowerCase().match(/[a-z][a-z0-9]{3,}/g) ?? []
}

/** The `n` words of a text that are rarest in the span: what a person who remembers the fact would type. */
function query(text: string, counts: Map<string, number>, n = 4): string {
  const unique = [...new Set(words(text))].filter(
    (w) => !['that', 'this', 'with', 'from', 'have', 'will', 'would', 'should', 'there', 'when', 'what'].includes(w)
  )
  return unique
    .sort((a, b) => (counts.get(a) ?? 0) - (counts.get(b) ?? 0) || b.length - a.length)
    .slice(0, n)
    .join(' ')
}

export function recallFacts(span: readonly Message[]): Fact[] {
  const counts = new Map<string, number>()
  const count = (t: string): void => {
    for (const w of words(t)) counts.set(w, (counts.get(w) ?? 0) + 1)
  }
  span.forEach((m) => {
    if (typeof m.content === 'string') count(m.content)
    else for (const b of m.content) count(b.type === 'text' ? String(b.text) : isToolResult(b) ? toolResultText(b) : JSON.stringify(b))
  })
  const facts: Fact[] = []
  // A sentence late in the first long request.
  const early = span.findIndex((m) => isPromptMessage(m) && userText(m).length >= 600)
  if (early >= 0) {
    const lines = userText(span[early]!)
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => words(l).length >= 6 && !l.startsWith('<'))
    const late = lines[Math.floor(lines.length * 0.75)]
    if (late) facts.push({ kind: 'late sentence of a request', text: late, query: query(late, counts), message: early })
  }
  // The exception line of the last failing command with a traceback; and the last command run.
  const calls = new Map<string, { command: string; index: number }>()
  span.forEach((m, i) => {
    if (typeof m.content === 'string') return
    for (const b of m.content) {
      if (isToolUse(b)) {
        const c = (b.input as { command?: unknown } | null)?.command
        if (typeof c === 'string') calls.set(b.id, { command: c, index: i })
      } else if (isToolResult(b)) {
        const out = toolResultText(b)
        const exception = out
          .split('\n')
          .reverse()
          .find((l) => /^[A-Za-z_][\w.]*(?:Error|Exception):\s+\S/.test(l))
        if (exception && out.includes('Traceback')) {
          const f: Fact = { kind: 'exception line', text: exception.trim(), query: query(exception, counts), message: i }
          const at = facts.findIndex((x) => x.kind === 'exception line')
          if (at >= 0) facts[at] = f
          else facts.push(f)
        }
      }
    }
  })
  // A line that says something went wrong, printed by a command that succeeded (no error flag, no status
  // other than 0 in its output): the last one of the span.
  const SIGNAL = /^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception|Warning): \S.*|FAILED \S.*|(?:error|fatal)(?:\[\w+\])?: \S.*)$/
  span.forEach((m, i) => {
    if (typeof m.content === 'string') return
    for (const b of m.content) {
      if (!isToolResult(b) || b.is_error === true) continue
      const out = toolResultText(b)
      const status = /<returncode>\s*(-?\d+)|exit code (-?\d+)/.exec(out)
      if (status && Number(status[1] ?? status[2]) !== 0) continue
      const line = out
        .split('\n')
        .reverse()
        .find((l) => l.length <= 300 && SIGNAL.test(l))
      if (!line) continue
      const f: Fact = { kind: 'signal line of a command that succeeded', text: line.trim(), query: query(line, counts), message: i }
      const at = facts.findIndex((x) => x.kind === f.kind)
      if (at >= 0) facts[at] = f
      else facts.push(f)
    }
  })
  // A later line of a command of several lines, kept with the command's entry.
  const multi = [...calls.values()].filter((c) => c.command.includes('\n') && words(c.command.split('\n')[1] ?? '').length >= 3).at(-1)
  if (multi) {
    const second = (multi.command.split('\n')[1] ?? '').trim()
    facts.push({ kind: 'later line of a multi-line command', text: second, query: query(second, counts), message: multi.index, inText: true })
  }
  // Plain lines a command printed or a file read held (a value, a line of code): one from the middle of each
  // of up to three outputs spread over the span, the kind a task needs back later and no digest keeps.
  const outputs: { text: string; message: number }[] = []
  span.forEach((m, i) => {
    if (typeof m.content === 'string') return
    for (const b of m.content) if (isToolResult(b)) outputs.push({ text: toolResultText(b), message: i })
  })
  for (const share of [0.25, 0.5, 0.75]) {
    const out = outputs[Math.floor(outputs.length * share)]
    if (!out) continue
    const lines = out.text.split('\n').filter((l) => l.trim().length <= 200 && words(l).length >= 4 && !SIGNAL.test(l))
    const line = lines[Math.floor(lines.length / 2)]
    if (!line || facts.some((f) => f.text === line.trim())) continue
    facts.push({ kind: 'plain output line', text: line.trim(), query: query(line, counts), message: out.message, inText: true })
  }
  const commands = [...calls.values()].filter((c) => words(c.command).length >= 3)
  const cmd = commands[Math.floor(commands.length / 2)]
  if (cmd) facts.push({ kind: 'command', text: cmd.command.split('\n')[0]!, query: query(cmd.command.split('\n')[0]!, counts), message: cmd.index })
  return facts.filter((f) => f.query.split(' ').length >= 2)
}
