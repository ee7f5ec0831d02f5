import type { FakeReply, ReceivedRequest } from './fake-anthropic.js'

/**
 * A model for a real coding agent to talk to: each conversation follows a script of tool calls, one a
 * request, and ends with a final text. Where a conversation stands is read from the newest tool result
 * of the script's own calls in the request (its id names the step), not counted: a retried request gets
 * the same step again, and a compacted history still ends with the newest steps.
 */
export interface ScriptStep {
  tool: string
  input: Record<string, unknown>
}

export interface Script {
  name: string
  /** Whether a request belongs to this conversation (the first script that matches is used). */
  match: (request: ReceivedRequest) => boolean
  steps: ScriptStep[]
  final: string
}

export function systemText(r: ReceivedRequest): string {
  const s = r.body.system as unknown
  if (typeof s === 'string') return s
  if (Array.isArray(s)) return s.map((b: { text?: string }) => b.text ?? '').join('\n')
  return ''
}

/** All the text of a request's messages, for matching a conversation by what it was asked. */
export function messagesText(r: ReceivedRequest): string {
  return JSON.stringify(r.body.messages)
}

/** The step of `script` whose result is the newest tool result of the request, or -1. */
function lastAnswered(r: ReceivedRequest, script: string): number {
  const prefix = `toolu_script_${script}_`
  for (let i = r.body.messages.length - 1; i >= 0; i--) {
    const content = r.body.messages[i]?.content
    if (!Array.isArray(content)) continue
    for (let j = content.length - 1; j >= 0; j--) {
      const b = content[j] as { type?: string; tool_use_id?: string }
      if (b.type === 'tool_result' && b.tool_use_id?.startsWith(prefix)) return Number(b.tool_use_id.slice(prefix.length).split('_')[0])
    }
  }
  return -1
}

export class ScriptedAgent {
  /** Steps handed out, per script: [script, step] in the order they were asked for. */
  readonly handed: [string, number][] = []
  /** Final texts given, per script. */
  readonly finished = new Map<string, number>()
  /** Called when a step is handed out (before the reply is sent): a test's hook to act mid-session. */
  onStep: (script: string, step: number) => void = () => undefined
  private calls = 0

  constructor(private readonly scripts: Script[]) {}

  reply(r: ReceivedRequest): FakeReply {
    const script = this.scripts.find((s) => s.match(r))
    if (!script) return { content: [{ type: 'text', text: 'No script for this conversation.' }] }
    const at = lastAnswered(r, script.name) + 1
    const step = script.steps[at]
    if (!step) {
      this.finished.set(script.name, (this.finished.get(script.name) ?? 0) + 1)
      return { content: [{ type: 'text', text: script.final }] }
    }
    this.handed.push([script.name, at])
    this.onStep(script.name, at)
    this.calls++
    return { content: [{ type: 'tool_use', id: `toolu_script_${script.name}_${at}_${this.calls}`, name: step.tool, input: step.input }] }
  }
}
