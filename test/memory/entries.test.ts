import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { EVIDENCE_PER_OUTPUT, PASSAGE_CHARS, PASSAGE_OVERLAP, linePassages, passages, readMemory } from '../../src/memory/entries.js'
import { SqliteStore } from '../../src/storage/sqlite.js'
import { assistant, shellStep, user } from '../helpers/history.js'

describe('cold-layer entries', () => {
  it('split a long text into overlapping passages that together hold all of it', () => {
    const text = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ')
    const parts = passages(text)
    expect(parts.length).toBeGreaterThan(2)
    for (const p of parts) expect(p.length).toBeLessThanOrEqual(PASSAGE_CHARS)
    for (let i = 0; i < 400; i++) expect(parts.some((p) => p.split(' ').includes(`word${i}`))).toBe(true)
    // consecutive passages share some words
    const shared = parts[0]!.split(' ').filter((w) => parts[1]!.split(' ').includes(w))
    expect(shared.join(' ').length).toBeGreaterThan(PASSAGE_OVERLAP / 2)
  })

  it("keep a frame's file:line as evidence wherever it stands in a line, a line of thousands of characters without a blank too", () => {
    // minified code or a base64 run: the evidence is found in one pass, and so is its absence
    const run = 'x'.repeat(3_900)
    const output = [`${run} at bundle.min.js:1:48213)`, run, 'see src/app.py:42, then retry', 'done'].join('\n')
    const entries = readMemory(
      [user('build it'), ...shellStep('a', 'node build.js', `${output}\n<returncode>1</returncode>`, true), assistant('it failed')],
      0,
      {
        modified: [],
        read: []
      }
    )
    const evidence = entries.filter((e) => e.kind === 'evidence').map((e) => e.text)
    expect(evidence).toContain('see src/app.py:42, then retry')
    expect(evidence.some((t) => t.endsWith('bundle.min.js:1:48213)') || t.startsWith('xxxx'))).toBe(true)
    expect(evidence).not.toContain(run)
  })

  it('keep a whole tool output as passages citing their lines, and beside it the lines that say why and the evidence, capped', () => {
    const noise = Array.from({ length: 5_000 }, (_, i) => `noise line ${i} of a long build log`)
    const output = [...noise, 'src/app.py:42: error: name "x" is not defined', '3 failed, 10 passed in 1.2s'].join('\n')
    const entries = readMemory([user('build it'), ...shellStep('a', 'make build', `${output}\n<returncode>2</returncode>`, true), assistant('it failed')], 0, {
      modified: [],
      read: []
    })
    const outputs = entries.filter((e) => e.kind === 'output')
    // every line of the output is in a passage, at the lines the passage cites
    const lines = `${output}\n<returncode>2</returncode>`.split('\n')
    for (const p of outputs) {
      expect(p.text.length).toBeLessThanOrEqual(PASSAGE_CHARS)
      expect(p.text).toBe(lines.slice(p.lines![0] - 1, p.lines![1]).join('\n'))
      expect(p).toMatchObject({ from: 1, to: 2 })
    }
    const covered = new Set(outputs.flatMap((p) => Array.from({ length: p.lines![1] - p.lines![0] + 1 }, (_, k) => p.lines![0] + k)))
    expect(covered.size).toBe(lines.length)
    expect(outputs.find((p) => p.text.includes('noise line 2500 of'))).toBeDefined()
    // the digest beside it
    expect(entries.filter((e) => e.kind === 'evidence').length).toBeLessThanOrEqual(EVIDENCE_PER_OUTPUT)
    expect(entries).toContainEqual({ kind: 'evidence', text: '3 failed, 10 passed in 1.2s', from: 1, to: 2 })
    expect(entries.find((e) => e.kind === 'error')?.text).toContain('src/app.py:42: error: name "x" is not defined')
    expect(entries.find((e) => e.kind === 'command')).toEqual({ kind: 'command', text: 'make build → failed (exit 2)', from: 1, to: 2 })
  })

  it('cut any text at line ends into passages of at most the bound that hold each of its characters, cite their lines, and never split a surrogate pair', () => {
    const piece = fc.oneof(
      fc.constantFrom('\n', '\n\n', ' ', '😀', '\u0000', 'é', '𝔘'),
      fc.string({ maxLength: 40 }),
      fc.string({ minLength: 100, maxLength: 700 })
    )
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), fc.integer({ min: 20, max: 400 }), (parts, max) => {
        const text = parts.join('')
        const overlap = Math.floor(max / 5)
        const out = linePassages(text, max, overlap)
        const lines = text.split('\n')
        const seen = lines.map(() => '')
        for (const p of out) {
          expect(p.text.length).toBeLessThanOrEqual(max)
          expect(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(p.text)).toBe(false)
          const [first, last] = p.lines
          if (first === last && lines[first - 1]!.length > max) {
            expect(lines[first - 1]).toContain(p.text)
            seen[first - 1] += p.text
          } else {
            expect(p.text).toBe(lines.slice(first - 1, last).join('\n'))
            for (let l = first; l <= last; l++) seen[l - 1] = lines[l - 1]!
          }
        }
        // every line that is not blanks only is whole in the passages (a long one, piece by piece)
        lines.forEach((line, i) => {
          if (line.trim() === '') return
          for (const ch of line) expect(seen[i]).toContain(ch)
        })
      }),
      { numRuns: 300 }
    )
  })

  it('keep what a successful run printed of an error, and a multi-line command whole', () => {
    const script = 'python3 -c "\nimport app\nprint(app.load())\n"'
    const entries = readMemory(
      [
        user('check it'),
        ...shellStep('a', script, 'ValueError: the config has no [db] section\n<returncode>0</returncode>'),
        ...shellStep('b', 'make lint', 'checked 40 files, 0 errors\n<returncode>0</returncode>'),
        assistant('the config lacks a section')
      ],
      0,
      { modified: [], read: [] }
    )
    const command = entries.find((e) => e.kind === 'command')
    expect(command?.text).toContain('print(app.load())')
    expect(entries.filter((e) => e.kind === 'evidence').map((e) => e.text)).toContain('python3 -c " printed: ValueError: the config has no [db] section')
    // a run that says nothing failed is no evidence of a failure
    expect(entries.some((e) => e.kind === 'evidence' && e.text.includes('make lint'))).toBe(false)
  })

  it('are pruned with the records past the retention, and capped per session', async () => {
    const store = new SqliteStore(':memory:')
    const owner = { compaction_id: 'cmp_1', session_id: 's', key_name: '', created_at: '2026-01-01T00:00:00.000Z' }
    await store.saveMemory(owner, [{ kind: 'ask', text: 'rotate the signing keys', from: 0, to: 0 }])
    expect(await store.recall('s', '', { text: 'signing keys', limit: 5 })).toHaveLength(1)
    expect((await store.prune(Date.parse('2026-02-01T00:00:00.000Z'), Date.now())).memory).toBe(1)
    expect(await store.recall('s', '', { text: 'signing keys', limit: 5 })).toEqual([])
    await store.close()
  })
})
