import { describe, expect, it } from 'vitest'
import { LIST_SECTIONS, SECTION_HEADINGS, SECTION_PURPOSE, emptySections, itemPath } from '../../src/compaction/sections.js'

describe('sections', () => {
  it('makes an empty summary with every list section empty and a blank objective', () => {
    const s = emptySections()
    expect(s.objective).toBe('')
    for (const key of LIST_SECTIONS) expect(s[key]).toEqual([])
    expect(Object.keys(s)).toHaveLength(LIST_SECTIONS.length + 1)
  })

  it('makes a fresh object each time, so that one summary cannot write into another', () => {
    const a = emptySections()
    a.next_steps.push('x')
    expect(emptySections().next_steps).toEqual([])
  })

  it('has a heading and a purpose for every section, and no two headings alike', () => {
    const keys = ['objective', ...LIST_SECTIONS] as const
    for (const k of keys) {
      expect(SECTION_HEADINGS[k].length).toBeGreaterThan(0)
      expect(SECTION_PURPOSE[k].length).toBeGreaterThan(0)
    }
    expect(new Set(keys.map((k) => SECTION_HEADINGS[k].toLowerCase())).size).toBe(keys.length)
  })
})

describe('itemPath', () => {
  it.each([
    ['src/a.py — added the guard', 'src/a.py'],
    ['`src/b.ts` — renamed', 'src/b.ts'],
    ['  lib/c.rs  ', 'lib/c.rs'],
    ['docs/x — y — z', 'docs/x'],
    ['a-b.md - not an em dash', 'a-b.md - not an em dash']
  ])('reads %j as %j', (item, path) => expect(itemPath(item)).toBe(path))
})
