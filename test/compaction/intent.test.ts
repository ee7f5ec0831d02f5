import { describe, expect, it } from 'vitest'
import { lastIntention, statedPlan } from '../../src/compaction/index.js'

describe('statedPlan', () => {
  it('reads a list the agent lays out as a plan, numbered or bulleted', () => {
    expect(statedPlan('Here is my plan:\n1. Read the parser\n2) Write a failing test\n3. Fix it')).toEqual([
      'Read the parser',
      'Write a failing test',
      'Fix it'
    ])
    expect(statedPlan('Next steps:\n- [ ] add the flag\n- [x] document it')).toEqual(['add the flag', 'document it'])
  })

  it('takes a list of findings for no plan, nor a list inside code, nor a single item', () => {
    expect(statedPlan('I found these problems:\n1. The key leaves out the locale\n2. The cache never expires')).toBeUndefined()
    expect(statedPlan('My plan:\n```\n1. not a plan\n2. code\n```')).toBeUndefined()
    expect(statedPlan('The plan:\n1. only one step')).toBeUndefined()
  })
})

describe('lastIntention', () => {
  it('is the last sentence that says what the agent will do, its harness label off', () => {
    expect(lastIntention('THOUGHT: The test fails on line 12. I will open the parser next. It is short.')).toBe('I will open the parser next.')
    expect(lastIntention('Done with the fix. Let me run the whole suite to be sure.')).toBe('Let me run the whole suite to be sure.')
  })

  it('is undefined where the agent states no intention', () => {
    expect(lastIntention('The fix is in and every test passes.')).toBeUndefined()
  })
})
