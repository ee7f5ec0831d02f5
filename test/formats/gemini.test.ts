import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { readLedger } from '../../src/compaction/index.js'
import { adaptHistory } from '../../src/formats/index.js'
import { geminiRules } from '../../src/formats/gemini.js'
import { type CompactDeps, runCompaction, summarized } from '../../src/service/compact.js'
import { ExtractiveSummarizer } from '../../src/summarizer/extractive.js'

type Content = { role?: string; parts: Record<string, unknown>[] }

const deps = (): CompactDeps => ({
  defaults: { budgetTokens: 45_000, keepTurns: 4 },
  extractive: new ExtractiveSummarizer(),
  newId: () => 'cmp_1',
  now: () => 0
})

/** A Gemini CLI session: its tools' calls (with ids, as it sends them), a thought part with its signature, outputs as `response.output`. */
function session(steps: number, chars = 3_000): Content[] {
  const contents: Content[] = [{ role: 'user', parts: [{ text: 'Fix the failing parser test in src/parser.ts' }] }]
  for (let i = 0; i < steps; i++) {
    const tool = i % 3 === 0 ? 'read_file' : i % 3 === 1 ? 'run_shell_command' : 'replace'
    const args =
      tool === 'read_file'
        ? { absolute_path: `/work/src/part_${i}.ts` }
        : tool === 'run_shell_command'
          ? { command: `npm test -- part_${i}` }
          : { file_path: `/work/src/part_${i}.ts`, old_string: 'a', new_string: 'b' }
    contents.push({
      role: 'model',
      parts: [{ thought: true, text: `thinking about step ${i}`, thoughtSignature: `sig-${i}` }, { functionCall: { id: `call-${i}`, name: tool, args } }]
    })
    contents.push({
      role: 'user',
      parts: [
        {
          functionResponse: {
            id: `call-${i}`,
            name: tool,
            response: { output: `${tool} ${i}: ${'o'.repeat(chars)}${i === 4 ? '\nFAIL src/parser.test.ts > parses\nError: expected 1 to be 2' : ''}` }
          }
        }
      ]
    })
  }
  contents.push({ role: 'model', parts: [{ text: 'Ran every step.' }] }, { role: 'user', parts: [{ text: 'Now run the whole suite' }] })
  return contents
}

describe('Gemini contents (format "gemini")', () => {
  it('reads calls and responses into pairs, by id, and by name and order where there is none', () => {
    const byName: Content[] = [
      { role: 'user', parts: [{ text: 'go' }] },
      {
        role: 'model',
        parts: [{ functionCall: { name: 'read_file', args: { absolute_path: '/a' } } }, { functionCall: { name: 'read_file', args: { absolute_path: '/b' } } }]
      },
      {
        role: 'user',
        parts: [{ functionResponse: { name: 'read_file', response: { output: 'A' } } }, { functionResponse: { name: 'read_file', response: { output: 'B' } } }]
      }
    ]
    const adapted = adaptHistory(byName, geminiRules)
    expect('kind' in adapted).toBe(false)
    if ('kind' in adapted) return
    expect(adapted.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user'])
    expect(adapted.messages[2]!.content).toEqual([
      { type: 'tool_result', tool_use_id: 'read_file#0', content: 'A' },
      { type: 'tool_result', tool_use_id: 'read_file#1', content: 'B' }
    ])
    // the ledger reads Gemini CLI's tools: what it read, changed and ran
    const ledger = readLedger(adapted.messages)
    expect(ledger.filesRead).toEqual(['/a', '/b'])
  })

  it('refuses what the API refuses, naming the content and part', () => {
    const cases: [Content[], RegExp][] = [
      [
        [
          { role: 'user', parts: [{ text: 'go' }] },
          { role: 'user', parts: [{ functionResponse: { name: 'x', response: {} } }] }
        ],
        /messages\[1\]: answers call "x#0"/
      ],
      [[{ role: 'user', parts: [] }], /messages\[0\]\.parts: a content needs at least one part/],
      [[{ role: 'assistant', parts: [{ text: 'hi' }] }], /messages\[0\]\.role: role must be "user" or "model"/],
      [[{ role: 'user', parts: [{}] }], /messages\[0\]\.parts\.0: a part must be an object with data/],
      [
        [
          { role: 'user', parts: [{ text: 'go' }] },
          { role: 'model', parts: [{ functionCall: { name: 'f', args: {} } }] },
          { role: 'model', parts: [{ text: 'again' }] }
        ],
        /call "f#0" has no output/
      ]
    ]
    for (const [contents, message] of cases) {
      const adapted = adaptHistory(contents as Record<string, unknown>[], geminiRules)
      expect('kind' in adapted ? adapted.message : 'read without a problem', String(message)).toMatch(message)
    }
  })

  it('compacts a Gemini CLI session into its own contents: the summary a user content, the kept ones as sent, signatures with their parts, the bound hard', async () => {
    const contents = session(16)
    const run = await runCompaction({ format: 'gemini', messages: contents, budgetTokens: 8_000, system: 'You are Gemini CLI.' }, deps())
    const r = run.response
    if (!summarized(r)) throw new Error('not summarized')
    const out = (r as unknown as { messages: Content[] }).messages
    expect(out[0]!.role).toBe('user')
    expect(out[0]!.parts[0]!.text).toContain('Fix the failing parser test')
    const kept = out.slice(1)
    // the kept contents are the client's own from kept_from on, as sent (but for clips, which name their place)
    const clipped = new Set(r.clips.map((c) => c.message_index))
    kept.forEach((c, k) => (clipped.has(r.kept_from + k) ? expect(c.role).toBe(contents[r.kept_from + k]!.role) : expect(c).toEqual(contents[r.kept_from + k])))
    for (const clip of r.clips) expect(clip.path).toMatch(/^\/messages\/\d+\/parts\/\d+\/(?:text|functionResponse\/response\/output)$/)
    // never a response without its call: the first kept content is no user content answering calls
    expect(kept[0]!.role === 'user' && kept[0]!.parts.some((p) => p.functionResponse !== undefined)).toBe(false)
    // a thought part with its signature comes back exactly as it was, in its content
    for (const c of kept)
      for (const p of c.parts)
        if (p.thoughtSignature !== undefined) expect(contents.some((o) => o.parts.some((q) => JSON.stringify(q) === JSON.stringify(p)))).toBe(true)
    expect(r.stats.context_after_compaction).toBeLessThanOrEqual(8_000)
    // the summary knows what was run and changed, in Gemini CLI's own tools
    expect(r.summary.text).toContain('src/part_2.ts')
  })

  it('keeps every pair and the hard bound for generated sessions (astral characters, NULs, tiny budgets)', async () => {
    const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200 }).map((t) => `${t}\u0000${t}`)
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 50, max: 6_000 }),
        text,
        fc.integer({ min: 1_500, max: 20_000 }),
        async (steps, chars, extra, budget) => {
          const contents = session(steps, chars)
          contents.push({ role: 'model', parts: [{ text: extra }] }, { role: 'user', parts: [{ text: extra }] })
          const run = await runCompaction({ format: 'gemini', messages: contents, budgetTokens: budget, mode: 'manual' }, deps())
          const r = run.response as unknown as { compacted: boolean; messages?: Content[]; stats: { context_after_compaction: number } }
          if (!r.compacted || !r.messages) return
          const adapted = adaptHistory(r.messages as Record<string, unknown>[], geminiRules)
          expect('kind' in adapted ? adapted.message : '').toBe('')
          for (const c of r.messages)
            for (const p of c.parts)
              for (const v of Object.values(p))
                if (typeof v === 'string') expect(v).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/)
        }
      ),
      { numRuns: 40 }
    )
  }, 60_000)
})

describe('Gemini pairs with ids on one side only', () => {
  it('reads a call with an id answered by a response without one (and the other way round)', () => {
    const contents = [
      { role: 'user', parts: [{ text: 'go' }] },
      { role: 'model', parts: [{ functionCall: { id: 'call-a', name: 'read_file', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'read_file', response: { output: 'A' } } }] },
      { role: 'model', parts: [{ functionCall: { name: 'glob', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { id: 'resp-b', name: 'glob', response: { output: 'B' } } }] }
    ]
    const adapted = adaptHistory(contents, geminiRules)
    expect('kind' in adapted ? adapted.message : 'read').toBe('read')
  })
})
