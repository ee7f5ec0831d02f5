import { createHash } from 'node:crypto'
import type { FakeReply, ReceivedRequest } from './fake-anthropic.js'

/**
 * A model for a real coding agent to talk to: each conversation (told apart by its system prompt, as an
 * agent's main loop and its subagents have their own) follows a script of tool calls, one a request, and
 * ends with a final text. The step of a conversation is counted by the requests it has sent since its
 * last tool result, not read from the history (a compacted history no longer holds the early steps).
 */
export interface ScriptStep {
  tool: string
  input: Record<string, unknown>
}

export interface Script {
  /** The conversation's steps, by the system prompt's first words (the first matching script is used). */
  match: (request: ReceivedRequest) => boolean
  steps: ScriptStep[]
  final: string
}

function systemText(r: ReceivedRequest): string {
  const s = r.body.system as unknown
  if (typeof s === 'string') return s
  if (Array.isArray(s)) return s.map((b: { text?: string }) => b.text ?? '').join('\n')
  return ''
}

/** Whether the newest turn (system messages after it aside) carries a tool result. */
function lastIsToolResult(r: ReceivedRequest): boolean {
  const last = r.body.messages.findLast((m) => m.role !== 'system')
  return Array.isArray(last?.content) && (last.content as { type?: string }[]).some((b) => b.type === 'tool_result')
}

export class ScriptedAgent {
  /** Where each conversation stands: its next step. */
  private readonly positions = new Map<string, number>()
  /** Conversations by their script, in the order they were first seen. */
  readonly conversations: string[] = []
  finished = 0
  private calls = 0

  constructor(private readonly scripts: Script[]) {}

  reply(r: ReceivedRequest): FakeReply {
    const script = this.scripts.find((s) => s.match(r))
    if (!script) return { text: 'No script for this conversation.' }
    const key = createHash('sha256').update(systemText(r)).digest('hex').slice(0, 12)
    if (!this.positions.has(key)) {
      this.positions.set(key, 0)
      this.conversations.push(key)
    }
    // A request that does not carry a tool result begins (or repeats) the script where it stands.
    let at = this.positions.get(key) ?? 0
    if (lastIsToolResult(r)) at++
    this.positions.set(key, at)
    const step = script.steps[at]
    if (!step) {
      this.finished++
      return { content: [{ type: 'text', text: script.final }] }
    }
    this.calls++
    return { content: [{ type: 'tool_use', id: `toolu_script_${key}_${at}_${this.calls}`, name: step.tool, input: step.input }] }
  }
}

export { systemText }
