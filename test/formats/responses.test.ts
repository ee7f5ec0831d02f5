import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { adaptHistory } from '../../src/formats/history.js'
import { responsesRules } from '../../src/formats/responses.js'
import { type CompactionInput, runCompaction } from '../../src/service/compact.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import { responsesInputRefusal } from '../helpers/fake-openai.js'

type Item = Record<string, unknown>
const deps = {
  defaults: { budgetTokens: 45_000 as const, keepTurns: 8 },
  extractive: new ExtractiveSummarizer(),
  newId: () => 'cmp_resp',
  now: () => performance.now()
}

/** What Codex CLI sends first: its ~21 KB instructions as a developer item, its tools as an item of their own. */
const instructions = {
  type: 'message',
  role: 'developer',
  content: [{ type: 'input_text', text: `You are Codex. ${'Follow the AGENTS.md rules. '.repeat(700)}` }]
}
const additionalTools = { type: 'additional_tools', tools: [{ type: 'custom', name: 'apply_patch', format: { type: 'grammar' } }] }
const reasoning = (k: number) => ({ type: 'reasoning', id: `rs_${k}`, summary: [], encrypted_content: `gAAAA${'Zm9v'.repeat(300)}${k}` })

/** One Codex step: reasoning, then a shell call and its output, or a patch (a custom tool) and its output. */
function step(k: number, output: string): Item[] {
  if (k % 4 === 3) {
    return [
      reasoning(k),
      {
        type: 'custom_tool_call',
        call_id: `call_${k}`,
        name: 'apply_patch',
        input: `*** Begin Patch\n*** Update File: src/part${k}.ts\n@@\n-old\n+new\n*** End Patch`
      },
      { type: 'custom_tool_call_output', call_id: `call_${k}`, output: 'Success. Updated the following files:\nM src/part' + k + '.ts' }
    ]
  }
  return [
    reasoning(k),
    { type: 'function_call', call_id: `call_${k}`, name: 'shell', arguments: JSON.stringify({ command: ['bash', '-lc', `cargo test part${k}`] }) },
    { type: 'function_call_output', call_id: `call_${k}`, output },
    ...(k % 5 === 4
      ? [
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `Step ${k} done.` }] },
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: `go on (${k})` }] }
        ]
      : [])
  ]
}

function codexHistory(steps: number, output = (k: number) => `error[E0308]: mismatched types in src/part${k}.rs\n${'x'.repeat(1_200)}`): Item[] {
  const items: Item[] = [
    instructions,
    additionalTools,
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fix the failing cargo tests.' }] }
  ]
  for (let k = 0; k < steps; k++) items.push(...step(k, output(k)))
  items.push({ role: 'user', content: 'Now run the whole suite.' })
  return items
}

const compact = (messages: Item[], extra: Partial<CompactionInput> = {}) =>
  runCompaction({ format: 'openai-responses', messages, mode: 'manual', ...extra }, deps)

describe('Responses API input items', () => {
  it('compact a Codex session: its instructions as sent, a summary item, its own items from a turn on; reasoning kept with its call; an input the API takes', async () => {
    const items = codexHistory(40)
    const { response } = await compact(items, { budgetTokens: 20_000 })
    if (!response.compacted) throw new Error('not compacted')
    const out = response.messages as unknown as Item[]
    expect(out[0]).toBe(instructions)
    expect(out[1]).toMatchObject({
      type: 'message',
      role: 'user',
      content: [{ type: 'input_text', text: expect.stringContaining('<compaction-summary') }, { type: 'input_text' }]
    })
    expect(out.slice(2)).toEqual(items.slice(response.kept_from))
    const first = items[response.kept_from]!
    // the tail opens a turn: never an output without its call, never a call without the reasoning before it
    expect(String(first.type ?? 'message')).not.toMatch(/_output$/)
    if (items[response.kept_from - 1]?.type === 'reasoning') throw new Error('a reasoning item was cut from its call')
    expect(responsesInputRefusal(out)).toBeUndefined()
    expect(response.stats.context_after_compaction).toBeLessThanOrEqual(20_000)
    expect(response.summary?.text).toContain('cargo test part')
  })

  it('passes an item type it does not know untouched, and keeps a call of an unknown kind with its output', async () => {
    const items: Item[] = [
      { role: 'user', content: 'list the files' },
      { type: 'local_shell_call', call_id: 'ls_1', id: 'lsh_1', status: 'completed', action: { type: 'exec', command: ['ls'] } },
      { type: 'local_shell_call_output', call_id: 'ls_1', output: 'a.ts\nb.ts' },
      { type: 'web_search_call', id: 'ws_1', status: 'completed' },
      { type: 'item_reference', id: 'msg_abc' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Two files.' }] },
      { role: 'user', content: 'thanks' }
    ]
    const adapted = adaptHistory(items, responsesRules)
    if ('kind' in adapted) throw new Error(adapted.message)
    expect(adapted.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user'])
    expect(adapted.starts).toEqual([0, 1, 2, 3, 6])
    const { response } = await compact(items, { keepTurns: 1 })
    if (!response.compacted) throw new Error('not compacted')
    const out = response.messages as unknown as Item[]
    expect(out.slice(1)).toEqual(items.slice(response.kept_from))
    expect(responsesInputRefusal(out)).toBeUndefined()
  })

  it('refuses, naming the item, an output that answers no call and a call left without its output', async () => {
    await expect(
      compact([
        { role: 'user', content: 'hi' },
        { type: 'function_call_output', call_id: 'nope', output: 'x' }
      ])
    ).rejects.toMatchObject({ status: 422, options: { path: '/messages/1' } })
    const open = [
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{}' },
      { role: 'user', content: 'and?' },
      { type: 'message', role: 'assistant', content: 'ok' }
    ]
    await expect(compact(open)).rejects.toMatchObject({ status: 422, options: { path: '/messages/1' } })
    await expect(compact([{ role: 'user', content: 'hi' }, { content: 'no type, no role' }])).rejects.toMatchObject({
      status: 400,
      options: { path: '/messages/1/type' }
    })
  })

  it('keeps its invariants on generated sessions: an input the API takes, the bound, the client’s items as sent but the reported clips', async () => {
    let compactedRuns = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ size: fc.integer({ min: 0, max: 40_000 }), astral: fc.boolean(), nul: fc.boolean() }), { minLength: 1, maxLength: 50 }),
        // the instructions alone are some 5,000 tokens: a budget under that compacts nothing it can keep
        fc.integer({ min: 8_000, max: 80_000 }),
        fc.constantFrom('auto', 'manual'),
        async (steps, budget, mode) => {
          const items = codexHistory(steps.length, (k) => {
            const s = steps[k]!
            return `${s.nul ? '\u0000' : ''}${(s.astral ? '🦀' : 'e').repeat(Math.max(1, Math.floor(s.size / 2)))}`
          })
          let run
          try {
            run = await compact(items, { budgetTokens: budget, mode })
          } catch (err) {
            expect((err as { status: number }).status).toBe(422)
            return
          }
          const { response } = run
          if (!response.compacted) return
          compactedRuns++
          const out = response.messages as unknown as Item[]
          expect(responsesInputRefusal(out)).toBeUndefined()
          expect(response.stats.context_after_compaction).toBeLessThanOrEqual(budget)
          expect(out[0]).toBe(instructions)
          const clipped = new Set(response.clips.map((c) => c.message_index))
          for (const c of response.clips) expect(c.path).toBe(`/messages/${c.message_index}/output`)
          items.slice(response.kept_from).forEach((item, i) => {
            if (!clipped.has(response.kept_from + i)) expect(out[2 + i]).toBe(item)
          })
        }
      ),
      { numRuns: 40 }
    )
    expect(compactedRuns).toBeGreaterThan(10) // the property reached compactions, not only histories under budget
  })
})
