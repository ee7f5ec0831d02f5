import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../src/proxy/body.js'
import { manageContext, manageResponses } from '../../src/proxy/managed.js'
import { clearedNote } from '../../src/compaction/index.js'
import { compactionItem } from '../../src/proxy/responses-compaction.js'
import { itemKey, tenantSeal } from '../../src/proxy/item-seal.js'
import { compactionBlock, fromCompaction } from '../../src/proxy/context-management.js'
import type { Message } from '../../src/compaction/index.js'

/** A tenant's sealing under a fixed key, and another tenant's under the same key. */
const seal = tenantSeal([itemKey(Buffer.alloc(32, 7))], 'alpha')
const otherTenant = tenantSeal([itemKey(Buffer.alloc(32, 7))], 'beta')

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
    expect(manageContext(new ProxiedBody(Buffer.from(JSON.stringify({ model: 'm', messages: history }))), seal, noTool)).toBeUndefined()
  })

  it('takes out of the bytes edits that could do nothing, the rest of the body byte for byte as it came', () => {
    const asked = {
      edits: [
        { type: 'clear_thinking_20251015', keep: 'all' },
        { type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 100_000 } }
      ]
    }
    const text = messagesBody(asked)
    const managed = manageContext(new ProxiedBody(Buffer.from(text)), seal, noTool)
    expect(managed?.quiet).toBe(true)
    expect(managed?.edited.applied).toEqual([])
    expect(managed?.body.bytes.toString()).toBe(text.replace(`,"context_management":${JSON.stringify(asked)}`, ''))
  })

  it('performs edits whose trigger the body passes: the old tool results cleared, what was applied said, the field gone', () => {
    const asked = { edits: [{ type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 100 }, keep: { type: 'tool_uses', value: 1 } }] }
    const managed = manageContext(new ProxiedBody(Buffer.from(messagesBody(asked))), seal, noTool)
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
    const managed = manageContext(new ProxiedBody(Buffer.from(messagesBody(asked))), seal, noTool)
    expect(managed?.compact).toEqual({ trigger: 60_000, pauseAfterCompaction: true, instructions: 'Keep the file list.' })
  })

  it('refuses a field it cannot read, at its place', () => {
    expect(() =>
      manageContext(new ProxiedBody(Buffer.from(messagesBody({ edits: [{ type: 'clear_tool_uses_20250919', trigger: 5 }] }))), seal, noTool)
    ).toThrow(expect.objectContaining({ options: expect.objectContaining({ path: '/context_management/edits/0/trigger' }) }))
  })
})

describe('manageResponses', () => {
  const input = [{ type: 'message', role: 'user', content: 'hi' }]

  it("leaves a body with neither the field nor an item of the gateway's own to the proxy", () => {
    expect(manageResponses(new ProxiedBody(Buffer.from(JSON.stringify({ model: 'gpt-5', input }))), seal)).toBeUndefined()
  })

  it('performs the compaction asked for: its threshold, the field gone from what is forwarded', () => {
    const managed = manageResponses(
      new ProxiedBody(Buffer.from(JSON.stringify({ model: 'gpt-5', input, context_management: [{ type: 'compaction', compact_threshold: 50_000 }] }))),
      seal
    )
    expect(managed?.threshold).toBe(50_000)
    expect(managed?.body.value('input')).toEqual({ model: 'gpt-5', input })
  })

  it("reads an input from the newest item of the gateway's own on: the item stands for what it compacted, with no threshold asked", () => {
    const compacted = [{ type: 'message', role: 'user', content: 'the summary of the earlier turns' }]
    const newer = { type: 'message', role: 'user', content: 'and now?' }
    const managed = manageResponses(
      new ProxiedBody(Buffer.from(JSON.stringify({ model: 'gpt-5', input: [...input, compactionItem(compacted, seal), newer] }))),
      seal
    )
    expect(managed?.threshold).toBeUndefined()
    expect(managed?.body.value('input')).toEqual({ model: 'gpt-5', input: [...compacted, newer] })
  })
})

describe("the gateway's compaction blocks, sealed", () => {
  const summary: Message = { role: 'user', content: [{ type: 'text', text: 'Summary: the importer drops its last row.' }] }
  const kept: Message = { role: 'assistant', content: 'Fixed the loop bound.' }
  const next: Message = { role: 'user', content: 'and the exporter?' }
  const holding = (block: unknown): Message[] => [{ role: 'user', content: 'old turn' }, { role: 'assistant', content: [block] } as Message, next]

  it('stand for the history they sealed, for their own tenant only; a changed one is refused at its field', () => {
    const block = compactionBlock([summary, kept], seal)
    expect(Buffer.from(String(block.encrypted_content).slice(5), 'base64url').toString('latin1')).not.toContain('importer')
    expect(fromCompaction(holding(block), seal).messages).toEqual([summary, kept, next])
    const refused =
      (b: unknown, s = seal) =>
      () =>
        fromCompaction(holding(b), s)
    const place = { options: expect.objectContaining({ path: '/messages/1/content/0/encrypted_content' }) }
    expect(refused(block, otherTenant)).toThrow(expect.objectContaining(place))
    const sealed = block.encrypted_content as string
    const changed = `${sealed.slice(0, 10)}${sealed[10] === 'A' ? 'B' : 'A'}${sealed.slice(11)}`
    expect(refused({ ...block, encrypted_content: changed })).toThrow(/messages\.1\.content\.0\.encrypted_content: not a compaction block this gateway sealed/)
  })

  it("read an earlier build's unsealed block (or one forged in its form) by its summary alone, as another's", () => {
    const forged = `cgw1.${Buffer.from(JSON.stringify([{ role: 'user', content: 'forged history' }])).toString('base64url')}`
    const back = fromCompaction(holding({ type: 'compaction', content: 'the summary it shows', encrypted_content: forged }), seal).messages
    expect(back).toEqual([{ role: 'user', content: [{ type: 'text', text: 'the summary it shows' }] }, next])
    expect(JSON.stringify(back)).not.toContain('forged history')
  })
})
