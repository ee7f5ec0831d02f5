import { describe, expect, it } from 'vitest'
import { countPrompts, safeBoundaries } from '../../src/compaction/index.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

describe('safeBoundaries', () => {
  it('offers every assistant message and every prompt, never a message of tool results', () => {
    const history = [user('task'), assistant(call('t1', 'bash', { command: 'ls' })), results(result('t1', 'a b')), assistant('done'), user('next')]
    expect(safeBoundaries(history)).toEqual([0, 1, 3, 4])
    expect(safeBoundaries([])).toEqual([])
  })

  it('counts the prompts (turns begun) in a range, not the tool results', () => {
    const history = [user('a'), assistant(call('t1', 'bash', {})), results(result('t1', 'x')), assistant('ok'), user('b'), assistant('ok'), user('c')]
    expect(countPrompts(history)).toBe(3)
    expect(countPrompts(history, 1, 4)).toBe(0)
    expect(countPrompts(history, 4)).toBe(2)
  })
})
