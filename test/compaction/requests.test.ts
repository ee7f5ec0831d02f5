import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { contentWords, isChatter, requestBody, requestEntries, requestShape, requestTitle, taskStatement } from '../../src/compaction/requests.js'

describe('requestBody', () => {
  it('takes out slash-command echoes, transcript markers, bare paths and uploaded-file listings', () => {
    const text = [
      '/compact is running…',
      '⎿ done',
      '[Request interrupted]',
      '<command-name>',
      'src/app/main.py',
      '<uploaded_files>/repo</uploaded_files>',
      'Fix the login redirect'
    ].join('\n')
    expect(requestBody(text)).toBe('Fix the login redirect')
  })

  it('keeps what follows a demonstration, not the demonstration', () => {
    const text = 'Here is an example.\n--- DEMONSTRATION ---\nfix some other repo\n--- END OF DEMONSTRATION ---\nNow fix the parser crash on empty input'
    expect(requestBody(text)).toBe('Now fix the parser crash on empty input')
  })
})

describe('requestShape', () => {
  it('is the same for requests differing only in numbers and blanks', () => {
    expect(requestShape('found 2 actions  in 10 files')).toBe(requestShape('found 31 actions in 7 files'))
    expect(requestShape('found 2 actions')).not.toBe(requestShape('found 2 errors'))
  })

  it('tells long requests with the same head apart by their length', () => {
    const head = 'a'.repeat(20_000)
    expect(requestShape(`${head}b`)).not.toBe(requestShape(`${head}bc`))
  })
})

describe('requestTitle', () => {
  it.each([
    ['<pr_description>\nConsider the following PR description:\n## Make the cache thread-safe\nbody', 'Make the cache thread-safe'],
    ['ISSUE:\n# Crash on empty config\nsteps...', 'Crash on empty config'],
    ['title: Support Python 3.13\n', 'Support Python 3.13']
  ])('reads the title of %j', (text, title) => expect(requestTitle(text)).toBe(title))

  it('has none for a plain request', () => expect(requestTitle('please rename foo to bar')).toBeUndefined())
})

describe('isChatter', () => {
  it.each([
    ['ok', true],
    ['thanks!', true],
    ['/clear', true],
    ['Rename the config loader and update its callers', false]
  ])('%j: %s', (text, chatter) => expect(isChatter(text)).toBe(chatter))

  it('takes a request said more than once, or counted as repeated, as chatter', () => {
    expect(isChatter('Your output was not formatted correctly, use one bash block', 3)).toBe(true)
    expect(isChatter('Fix the build (×4)')).toBe(true)
  })
})

describe('taskStatement', () => {
  it('is the first real request, as its title when it has one, skipping chatter and repeated complaints', () => {
    const requests = ['hi', 'Format error: use one block', 'ISSUE:\nDates parse wrong in UTC+14\nmore detail', 'Format error: use one block']
    expect(taskStatement(requests)).toEqual({ index: 2, objective: 'Dates parse wrong in UTC+14' })
  })

  it('takes the first sentences of a request without a title, shortened to 300 characters', () => {
    const t = taskStatement([`Refactor the storage layer. ${'Keep the API the same. '.repeat(40)}`])
    expect(t?.objective.startsWith('Refactor the storage layer. Keep the API the same.')).toBe(true)
    expect(t?.objective.length).toBeLessThanOrEqual(300)
  })

  it('is undefined when every request is chatter', () => expect(taskStatement(['ok', 'thanks'])).toBeUndefined())
})

describe('contentWords', () => {
  it('counts content words only, lower case, without stop words', () => {
    expect([...contentWords('The Parser and THE parser fail at it')]).toEqual(['parser', 'fail'])
  })
})

describe('requestEntries', () => {
  it('lists each request once, where it last came, counted, noting when its numbers varied', () => {
    expect(requestEntries(['fix a', 'found 2 errors', 'fix b', 'found 3 errors', 'fix a'])).toEqual([
      'fix b',
      'found 3 errors (×2, numbers varied)',
      'fix a (×2)'
    ])
  })
})

describe('requestShape, as the three replacements it stands for', () => {
  it('agrees with \\d+ → #, \\s+ → one space and trim on any text, Unicode blanks included', async () => {
    const fc = (await import('fast-check')).default
    const blanks = [' ', '\t', '\n', '\r', '\v', '\f', '\u00a0', '\u1680', '\u2003', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff']
    const piece = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom(...blanks), fc.integer({ min: 0, max: 99_999 }).map(String), fc.constantFrom('١٢', '²'))
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = pieces.join('')
        expect(requestShape(text)).toBe(text.replace(/\d+/g, '#').replace(/\s+/g, ' ').trim())
      }),
      { numRuns: 500 }
    )
  })
})

describe('the objective is never a label', () => {
  const word = fc.constantFrom('Issue', 'Text', 'Task', 'Problem', 'Description', 'Bug', 'Report', 'Summary', 'Details', 'Context', 'Request')
  const label = fc.array(word, { minLength: 1, maxLength: 3 }).map((w) => w.join(' '))
  const instruction = fc
    .tuple(
      fc.constantFrom('The parser', 'Saving a model', 'The login form', 'Exporting to CSV', 'The cache layer'),
      fc.constantFrom('drops trailing commas', 'fails on empty input', 'loses the last row', 'raises a KeyError', 'hangs on large files'),
      fc.constantFrom(' when the input ends early.', ' since the last release.', ' on Windows only.', '.')
    )
    .map(([a, b, c]) => `${a} ${b}${c}`)
  /** The ways harnesses and trackers put a heading before the instruction. */
  const shapes: ((l: string, i: string, eol: string) => string)[] = [
    (l, i, eol) => `**${l}**${eol}${i}`,
    (l, i, eol) => `**${l}:**${eol}${eol}${i}`,
    (l, i, eol) => `## ${l}${eol}${eol}${i}`,
    (l, i, eol) => `${l}:${eol}${i}`,
    (l, i) => `**${l}** ${i}`,
    (l, i) => `**${l}**: ${i}`,
    (l, i, eol) => `Consider the following issue description:${eol}${eol}**${l}**${eol}${eol}${i}`,
    (l, i, eol) => `Consider the following PR description:${eol}${eol}**${l}**${eol}${eol}${i}`,
    (l, i, eol) => `<pr_description>${eol}**${l}**${eol}${i}${eol}</pr_description>`,
    (l, i, eol) => `Here is the task:${eol}<issue>${eol}### **${l}**${eol}> ${i}${eol}</issue>`
  ]
  it('takes the instruction a heading introduces, in every shape and line ending (property)', () => {
    fc.assert(
      fc.property(label, instruction, fc.nat(shapes.length - 1), fc.constantFrom('\n', '\r\n'), (l, i, k, eol) => {
        const text = (shapes[k] as (typeof shapes)[number])(l, i, eol)
        const objective = taskStatement([text])?.objective ?? ''
        expect(objective.startsWith(i.replace(/\.$/, '')), `${JSON.stringify(text)} → ${objective}`).toBe(true)
        expect(objective).not.toContain('**')
      })
    )
  })

  it('keeps an instruction that points at what follows as the instruction', () => {
    const objective = taskStatement(['Rename the exporter functions as follows:\nsave_rows to write_rows, load_rows to read_rows'])?.objective
    expect(objective).toMatch(/^Rename the exporter functions as follows:/)
  })
})
