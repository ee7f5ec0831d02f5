import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../src/proxy/body.js'
import { manageContext, manageResponses } from '../../src/proxy/managed.js'
import { clearedNote } from '../../src/compaction/index.js'
import { compactionItem } from '../../src/proxy/responses-compaction.js'

const history = [
  { role: 'user', content: 'list the files' },
  { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.ts\nb.ts\n'.repeat(200) }] },
  { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_2', name: 'bash', input: { command: 'cat a.ts' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'export const a = 1\n'.repeat(200) }] },
  { role: 'assistant', content: 'done' },
  { role: 'user', content: 'thanks' }
]

/** A body as its client writes it: a number JSON.parse cannot keep, and the field where Claude Code puts it, last. */
function messagesBody(contextManagement: unknown): string {
  const head = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: history }).slice(0, -1)
  return `${head},"temperature":1e400,"context_management":${JSON.stringify(contextManagement)}}`
}

/** Placeholders that name no tool (the conversation's model has none). */
const noTool = (id: string): string => clearedNote(undefined, id)

describe('manageContext', () => {
  it('leaves a body without the field to the proxy', () => {
    expect(manageContext(new ProxiedBody(Buffer.from(JSON.stringify({ model: 'm', messages: history }))), noTool)).toBeUndefined()
  })

  it('takes out of the bytes edits that could do nothing, the rest of the body byte for byte as it came', () => {
    const asked = {
      edits: [
        { type: 'clear_thinking_20251015', keep: 'all' },
        { type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 100_000 } }
      ]
    }
    const text = messagesBody(asked)
    const managed = manageContext(new ProxiedBody(Buffer.from(text)), noTool)
    expect(managed?.quiet).toBe(true)
    expect(managed?.edited.applied).toEqual([])
    expect(managed?.body.bytes.toString()).toBe(text.replace(`,"context_management":${JSON.stringify(asked)}`, ''))
  })

  it('performs edits whose trigger the body passes: the old tool results cleared, what was applied said, the field gone', () => {
    const asked = { edits: [{ type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 100 }, keep: { type: 'tool_uses', value: 1 } }] }
    const managed = manageContext(new ProxiedBody(Buffer.from(messagesBody(asked))), noTool)
    expect(managed?.quiet).toBeUndefined()
    expect(managed?.edited.applied).toEqual([expect.objectContaining({ type: 'clear_tool_uses_20250919', cleared_tool_uses: 1 })])
    expect(managed?.edited.cleared.map((c) => c.tool_use_id)).toEqual(['toolu_1'])
    const forwarded = managed?.body.value() as Record<string, unknown> & { messages: { content: unknown }[] }
    expect(forwarded.context_management).toBeUndefined()
    expect(JSON.stringify(forwarded.messages[2]!.content)).not.toContain('b.ts')
    expect(JSON.stringify(forwarded.messages[4]!.content)).toContain('export const a = 1')
  })

  it('reads a compaction asked for with its trigger, instructions and pause', () => {
    const asked = {
      edits: [{ type: 'compact_20260112', trigger: { type: 'input_tokens', value: 60_000 }, pause_after_compaction: true, instructions: 'Keep the file list.' }]
    }
    const managed = manageContext(new ProxiedBody(Buffer.from(messagesBody(asked))), noTool)
    expect(managed?.compact).toEqual({ trigger: 60_000, pauseAfterCompaction: true, instructions: 'Keep the file list.' })
  })

  it('refuses a field it cannot read, at its place', () => {
    expect(() => manageContext(new ProxiedBody(Buffer.from(messagesBody({ edits: [{ type: 'clear_tool_uses_20250919', trigger: 5 }] }))), noTool)).toThrow(
      expect.objectContaining({ options: expect.objectContaining({ path: '/context_management/edits/0/trigger' }) })
    )
  })
})

describe('manageResponses', () => {
  const input = [{ type: 'message', role: 'user', content: 'hi' }]

  it("leaves a body with neither the field nor an item of the gateway's own to the proxy", () => {
    expect(manageResponses(new ProxiedBody(Buffer.from(JSON.stringify({ model: 'gpt-5', input }))))).toBeUndefined()
  })

  it('performs the compaction asked for: its threshold, the field gone from what is forwarded', () => {
    const managed = manageResponses(
      new ProxiedBody(Buffer.from(JSON.stringify({ model: 'gpt-5', input, context_management: [{ type: 'compaction', compact_threshold: 50_000 }] })))
    )
    expect(managed?.threshold).toBe(50_000)
    expect(managed?.body.value('input')).toEqual({ model: 'gpt-5', input })
  })

  it("reads an input from the newest item of the gateway's own on: the item stands for what it compacted, with no threshold asked", () => {
    const compacted = [{ type: 'message', role: 'user', content: 'the summary of the earlier turns' }]
    const newer = { type: 'message', role: 'user', content: 'and now?' }
    const managed = manageResponses(new ProxiedBody(Buffer.from(JSON.stringify({ model: 'gpt-5', input: [...input, compactionItem(compacted), newer] }))))
    expect(managed?.threshold).toBeUndefined()
    expect(managed?.body.value('input')).toEqual({ model: 'gpt-5', input: [...compacted, newer] })
  })
})
