import { describe, expect, it } from 'vitest'
import { DEFAULT_RENDER, clipToolOutput, findPriorSummaries, renderSpan, spanText } from '../../src/compaction/index.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

describe('clipToolOutput', () => {
  const noisy = [
    ...Array.from({ length: 400 }, (_, i) => `collecting module ${i} ok`),
    'Traceback (most recent call last):',
    '  File "src/app.py", line 12, in main',
    'ValueError: bad input',
    ...Array.from({ length: 400 }, (_, i) => `log line ${i}`),
    'FAILED tests/test_app.py::test_main - AssertionError: expected 3',
    ...Array.from({ length: 400 }, (_, i) => `trailing ${i}`),
    'exit code 1'
  ].join('\n')

  it('keeps head, tail and the signal lines of the middle', () => {
    const clipped = clipToolOutput(noisy, DEFAULT_RENDER)
    expect(clipped.length).toBeLessThan(noisy.length / 4)
    for (const line of [
      'Traceback (most recent call last):',
      '  File "src/app.py", line 12, in main',
      'ValueError: bad input',
      'FAILED tests/test_app.py::test_main - AssertionError: expected 3',
      'exit code 1',
      'collecting module 0 ok'
    ]) {
      expect(clipped).toContain(line)
    }
    expect(clipped).toMatch(/lines clipped; \d+ signal lines kept/)
  })

  it('the plain clip keeps only the first characters', () => {
    const plain = clipToolOutput(noisy, { ...DEFAULT_RENDER, clip: 'plain', toolOutputHead: 2_000 })
    expect(plain).not.toContain('ValueError: bad input')
    expect(plain.length).toBe(2_001)
  })

  it('leaves short output alone and clips one giant line', () => {
    expect(clipToolOutput('short', DEFAULT_RENDER)).toBe('short')
    expect(clipToolOutput('z'.repeat(50_000), DEFAULT_RENDER).length).toBeLessThan(2_000)
  })
})

describe('renderSpan', () => {
  it('drops thinking, shows media as placeholders, names tools, redacts secrets', () => {
    const span = renderSpan([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look at this' },
          { type: 'image', source: { type: 'base64', data: 'AAAA' } }
        ]
      },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'secret thoughts', signature: 's' }, call('1', 'bash', { command: 'env' })] },
      results(result('1', 'ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123')),
      assistant('done')
    ])
    const text = spanText(span)
    expect(text).toContain('[#0 user]')
    expect(text).toContain('[image]')
    expect(text).not.toContain('secret thoughts')
    expect(text).toContain('→ bash: env')
    expect(text).toContain('← bash (ok):')
    expect(text).not.toContain('sk-ant-api03')
    expect(text).toContain('[REDACTED')
  })

  it('lifts a prior summary out instead of rendering it as the user speaking', () => {
    const prior = '<compaction-summary id="cmp_a" version="1" compacted_turns="4">\n## Files modified\n- src/a.ts — added x\n</compaction-summary>'
    const messages = [
      {
        role: 'user' as const,
        content: [
          { type: 'text', text: prior },
          { type: 'text', text: 'continue' }
        ]
      },
      assistant('ok')
    ]
    const span = renderSpan(messages)
    const priors = findPriorSummaries(messages)
    expect(priors).toHaveLength(1)
    expect(priors[0]!.sections.files_modified).toEqual(['src/a.ts — added x'])
    expect(priors[0]!.compactedTurns).toBe(4)
    expect(spanText(span)).not.toContain('compaction-summary')
    expect(spanText(span)).toContain('continue')
  })

  it('numbers parts by their index in the history', () => {
    const span = renderSpan([user('a'), assistant('b')], 10)
    expect(span.parts.map((p) => p.index)).toEqual([10, 11])
  })
})
