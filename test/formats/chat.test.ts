import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { argumentsInput, chatRules } from '../../src/formats/chat.js'
import { adaptHistory } from '../../src/formats/history.js'
import { type CompactionInput, runCompaction } from '../../src/service/compact.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'
import { chatCompletionsRefusal } from '../helpers/fake-openai.js'

type Item = Record<string, unknown>
const deps = {
  defaults: { budgetTokens: 45_000 as const, keepTurns: 8 },
  extractive: new ExtractiveSummarizer(),
  newId: () => 'cmp_chat',
  now: () => performance.now()
}

const system = { role: 'system', content: 'You are a coding agent. Use the tools.' }
const developer = { role: 'developer', content: [{ type: 'text', text: 'Prefer small diffs.' }] }
/** One agent step: the assistant calls the shell (n parallel calls), the tools answer. */
function step(k: number, output: string, n = 1): Item[] {
  const calls = Array.from({ length: n }, (_, j) => ({
    id: `call_${k}_${j}`,
    type: 'function',
    function: { name: 'shell', arguments: JSON.stringify({ command: `npm test -- part${k}_${j}` }) }
  }))
  return [{ role: 'assistant', content: null, tool_calls: calls }, ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: output }))]
}
function agentHistory(steps: number, output = (k: number) => `FAIL test/part${k}.test.ts\n${'x'.repeat(1_500)}`): Item[] {
  const items: Item[] = [system, developer, { role: 'user', content: 'Make the parser tests pass.' }]
  for (let k = 0; k < steps; k++) {
    items.push(...step(k, output(k), 1 + (k % 3)))
    if (k % 5 === 4) items.push({ role: 'assistant', content: `Step ${k} done.` }, { role: 'user', content: [{ type: 'text', text: `keep going (${k})` }] })
  }
  items.push({ role: 'user', content: 'Now run the whole suite.' })
  return items
}

const compact = (messages: Item[], extra: Partial<CompactionInput> = {}) => runCompaction({ format: 'openai-chat', messages, mode: 'manual', ...extra }, deps)

describe('Chat Completions histories', () => {
  it('compact to: the system messages as sent, one summary message, the client’s own messages from a turn on; a request the API takes', async () => {
    const items = agentHistory(40)
    const { response } = await compact(items, { budgetTokens: 12_000 })
    expect(response.compacted).toBe(true)
    if (!response.compacted) return
    const out = response.messages as unknown as Item[]
    expect(out.slice(0, 2)).toEqual([system, developer])
    expect(out[2]).toMatchObject({ role: 'user', content: [{ type: 'text', text: expect.stringContaining('<compaction-summary') }, { type: 'text' }] })
    expect(response.kept_from).toBeGreaterThan(2)
    expect(out.slice(3)).toEqual(items.slice(response.kept_from))
    expect(items[response.kept_from]!.role).not.toBe('tool') // never between a call and its output
    expect(chatCompletionsRefusal(JSON.stringify({ model: 'm', messages: out }))).toBeUndefined()
    expect(response.stats.compacted_messages).toBe(response.kept_from - 2)
    expect(response.stats.kept_messages).toBe(items.length - response.kept_from)
    expect(response.stats.context_after_compaction).toBeLessThanOrEqual(12_000)
    expect(response.summary?.text).toContain('npm test -- part')
  })

  it('clips an output too big for the bound in the client’s own message, and says where', async () => {
    const items = agentHistory(6, (k) => (k === 5 ? `Traceback (most recent call last):\n${'line of output\n'.repeat(9_000)}` : 'ok'))
    const { response } = await compact(items, { budgetTokens: 4_000 })
    if (!response.compacted) throw new Error('not compacted')
    expect(response.clips.length).toBeGreaterThan(0)
    const clip = response.clips[0]!
    expect(clip).toMatchObject({ kind: 'tool_result', path: `/messages/${clip.message_index}/content` })
    const out = response.messages as unknown as Item[]
    const k = out.length - (items.length - clip.message_index)
    const clipped = out[k]!
    expect(clipped.role).toBe('tool')
    expect((clipped.content as string).length).toBe(clip.kept_chars)
    expect((items[clip.message_index]!.content as string).length).toBe(clip.original_chars)
    // every kept message not clipped, as sent (the step's three parallel outputs were each clipped)
    const clippedAt = new Set(response.clips.map((c) => c.message_index))
    expect(clippedAt.size).toBe(3)
    items.slice(response.kept_from).forEach((item, i) => {
      if (!clippedAt.has(response.kept_from + i)) expect(out[3 + i]).toBe(item)
    })
    expect(response.stats.context_after_compaction).toBeLessThanOrEqual(4_000)
  })

  it('refuses, naming the message, what the API refuses: an output answering no call, a call left unanswered, an unknown role', async () => {
    const answersNothing = [
      { role: 'user', content: 'hi' },
      { role: 'tool', tool_call_id: 'call_x', content: 'out' }
    ]
    await expect(compact(answersNothing)).rejects.toMatchObject({ status: 422, options: { path: '/messages/1' } })
    const unanswered = [{ role: 'user', content: 'hi' }, ...step(0, 'o').slice(0, 1), { role: 'user', content: 'and?' }, { role: 'assistant', content: 'ok' }]
    await expect(compact(unanswered)).rejects.toMatchObject({ status: 422, options: { path: '/messages/1' } })
    const [calls, first, second] = step(0, 'o', 2)
    const interrupted = [{ role: 'user', content: 'hi' }, calls!, first!, { role: 'user', content: 'wait' }, second!]
    await expect(compact(interrupted)).rejects.toMatchObject({
      status: 422,
      options: { path: '/messages/1' },
      message: expect.stringContaining('call "call_0_1" has no output before messages[3]')
    })
    await expect(
      compact([
        { role: 'user', content: 'hi' },
        { role: 'function', content: 'x' }
      ])
    ).rejects.toMatchObject({ status: 400, options: { path: '/messages/1/role' } })
    await expect(compact([system])).rejects.toMatchObject({ status: 400 })
  })

  it('reads arguments as the JSON object they are, else as their text', () => {
    expect(argumentsInput('{"command":"ls"}')).toEqual({ input: { command: 'ls' }, as: 'json' })
    expect(argumentsInput('*** Begin Patch')).toEqual({ input: { input: '*** Begin Patch' }, as: 'input' })
    const adapted = adaptHistory([system, { role: 'user', content: 'a' }, { role: 'user', content: 'b' }, { role: 'assistant', content: 'c' }], chatRules)
    expect(adapted).toMatchObject({ leading: 1, systemText: system.content, starts: [1, 3], messages: [{ role: 'user' }, { role: 'assistant' }] })
  })

  it('keeps its invariants on generated histories: a request the API takes, the bound, the client’s messages as sent but the reported clips', async () => {
    let compactedRuns = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ calls: fc.integer({ min: 0, max: 3 }), size: fc.integer({ min: 0, max: 30_000 }), emoji: fc.boolean(), talk: fc.boolean() }), {
          minLength: 1,
          maxLength: 60
        }),
        fc.integer({ min: 2_000, max: 40_000 }),
        fc.constantFrom('auto', 'manual'),
        async (steps, budget, mode) => {
          const items: Item[] = [system, { role: 'user', content: 'go' }]
          steps.forEach((s, k) => {
            const text = (s.emoji ? '😀𝒳' : 'a').repeat(Math.max(1, Math.floor(s.size / 2)))
            if (s.calls > 0) items.push(...step(k, text, s.calls))
            else items.push({ role: 'assistant', content: text })
            if (s.talk) items.push({ role: 'user', content: `next ${k}` })
          })
          if (items.at(-1)!.role !== 'user') items.push({ role: 'user', content: 'last' })
          let run
          try {
            run = await compact(items, { budgetTokens: budget, mode })
          } catch (err) {
            // the one refusal a valid history may get: its newest step cannot fit the budget even clipped
            expect((err as { status: number }).status).toBe(422)
            return
          }
          const { response } = run
          if (!response.compacted) return
          compactedRuns++
          const out = response.messages as unknown as Item[]
          expect(chatCompletionsRefusal(JSON.stringify({ model: 'm', messages: out }))).toBeUndefined()
          expect(response.stats.context_after_compaction).toBeLessThanOrEqual(budget)
          expect(out[0]).toBe(system)
          const clipped = new Set(response.clips.map((c) => c.message_index))
          items.slice(response.kept_from).forEach((item, i) => {
            if (!clipped.has(response.kept_from + i)) expect(out[2 + i]).toBe(item)
          })
        }
      ),
      { numRuns: 60 }
    )
    expect(compactedRuns).toBeGreaterThan(10) // the property reached compactions, not only histories under budget
  })
})

describe('a Chat Completions history at the size users send', () => {
  it('of 50,000 messages (some 9 MB, emoji at every length) compacts within the bound, the kept messages as sent', async () => {
    const items: Item[] = [system, { role: 'user', content: 'Refactor the whole repository.' }]
    for (let k = 0; items.length < 50_000; k++) items.push(...step(k, `${'🦀'.repeat(k % 97)}${'x'.repeat(300 + (k % 13))}`, 1 + (k % 3)))
    items.push({ role: 'user', content: 'Keep going.' })
    expect(JSON.stringify(items).length).toBeGreaterThan(9_000_000)
    const { response } = await compact(items, { budgetTokens: 45_000, mode: 'auto' })
    if (!response.compacted) throw new Error('not compacted')
    expect(response.stats.context_after_compaction).toBeLessThanOrEqual(45_000)
    const out = response.messages as unknown as Item[]
    expect(out.slice(2)).toEqual(items.slice(response.kept_from))
    expect(chatCompletionsRefusal(JSON.stringify({ model: 'm', messages: out }))).toBeUndefined()
  }, 60_000)
})
