import { describe, expect, it } from 'vitest'
import { classifyRequests, fingerprint, lineFingerprints, requestPieces, usersWords, withoutAnsi } from '../../src/compaction/index.js'

describe('requestPieces', () => {
  it('cuts a request into elements, worked examples and paragraphs, a fenced block whole', () => {
    const text = [
      'Fix the parser.',
      '<instructions>',
      'Use one command.',
      '',
      'Never two.',
      '</instructions>',
      'Here is an example:',
      '--- DEMONSTRATION ---',
      'another task',
      '',
      'its steps',
      '--- END OF DEMONSTRATION ---',
      '',
      '```',
      'code',
      '',
      'more code',
      '```'
    ].join('\n')
    expect(requestPieces(text)).toEqual([
      'Fix the parser.',
      '<instructions>\nUse one command.\n\nNever two.\n</instructions>',
      'Here is an example:',
      '--- DEMONSTRATION ---\nanother task\n\nits steps\n--- END OF DEMONSTRATION ---',
      '```\ncode\n\nmore code\n```'
    ])
  })

  it('takes an element never closed, or a worked example never ended, for a paragraph', () => {
    expect(requestPieces('<notes>\nleft open\n\nnext')).toEqual(['<notes>\nleft open', 'next'])
    expect(requestPieces('--- DEMONSTRATION ---\nno end\n\nnext')).toEqual(['--- DEMONSTRATION ---\nno end', 'next'])
  })

  it('stays linear on what a hostile client sends: a megabyte of unclosed tags, of example markers, one long line, astral characters', () => {
    // each would take a scan of the rest of the text per line if the closing lines were searched for afresh
    for (const text of ['<a>\n'.repeat(250_000), '--- DEMONSTRATION ---\n'.repeat(100_000), 'x'.repeat(2_000_000), '😀\n'.repeat(300_000)]) {
      const pieces = requestPieces(text)
      expect(pieces.join('').replace(/\n/g, '')).toBe(text.replace(/\n/g, ''))
    }
  })
})

describe("the harness's pieces", () => {
  it("tells markup, repetition in the span and text other conversations sent from the user's words", () => {
    const shared = 'This paragraph is the same in every conversation of this key.'
    const common = new Set(lineFingerprints(shared).map((l) => l.fingerprint))
    const nag = 'Please reply with exactly one command block, as the format requires.'
    const requests = [
      `Fix the date parser.\n\n<system-reminder>\nkeep it short\n</system-reminder>\n\n${shared}`,
      nag,
      nag,
      `${nag}\n\nAlso rename parse_date.`
    ]
    const kinds = classifyRequests(requests, (fp) => common.has(fp)).map((pieces) => pieces.map((p) => p.harness ?? 'own'))
    expect(kinds).toEqual([['own', 'markup', 'common'], ['repeated'], ['repeated'], ['repeated', 'own']])
  })

  it("keeps the user's words verbatim and names each piece of harness text once, where it first came", () => {
    const nag = 'Please reply with exactly one command block, as the format requires.'
    const words = usersWords([`Fix the date parser.\n\n<rules>\n${'a rule\n'.repeat(20)}</rules>`, nag, nag, `${nag}\n\nAlso rename parse_date.`])
    expect(words).toEqual([
      // 8 + 20 × 7 + 8 characters
      'Fix the date parser.\n\n[harness text left out: <rules>, "a rule", 156 characters]',
      `[harness text left out: sent 3 times, "${nag}"]`,
      '',
      'Also rename parse_date.'
    ])
  })

  it('strips ANSI codes, with or without the escape a terminal copy lost', () => {
    expect(withoutAnsi('\u001b[1mbold\u001b[22m and [1mopus[22m and [0;31mred[0m, but [x] and a[1] stay')).toBe('bold and opus and red, but [x] and a[1] stay')
  })

  it('fingerprints a line with its case, blanks and numbers aside, and only lines long enough to tell apart', () => {
    expect(lineFingerprints('Found 2 actions in   the reply, expected one\nshort')).toEqual([
      { fingerprint: fingerprint('found # actions in the reply, expected one'), chars: 44 }
    ])
    expect(lineFingerprints('found 3 actions in the reply, expected one')[0]?.fingerprint).toBe(fingerprint('found # actions in the reply, expected one'))
    expect(fingerprint('a')).not.toBe(fingerprint('b'))
  })
})

describe('markers between turns', () => {
  it("are not the user's words: a bracketed sentence at a line's start goes, a link or a log level stays", () => {
    const words = usersWords([
      '[Request interrupted by user for tool use]\nNo, run only the unit tests.',
      '[Transcript segment begins here; earlier context was not captured.]Fix the importer.',
      '[See the docs](https://example.com/docs) before you change it.\n[ERROR] the build failed here'
    ])
    expect(words).toEqual([
      'No, run only the unit tests.',
      'Fix the importer.',
      '[See the docs](https://example.com/docs) before you change it.\n[ERROR] the build failed here'
    ])
  })
})
