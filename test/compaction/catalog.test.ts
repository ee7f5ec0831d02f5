import { describe, expect, it } from 'vitest'
import { TOOL_CATALOG, toolRule } from '../../src/compaction/catalog.js'

describe('toolRule', () => {
  it.each([
    ['Edit', 'write'],
    ['write_file', 'write'],
    ['Read', 'read'],
    ['READ_FILE', 'read'],
    ['str_replace_based_edit_tool', 'editor'],
    ['apply_patch', 'patch'],
    ['Bash', 'shell'],
    ['execute_bash', 'shell'],
    ['goto', 'open']
  ])('knows %s as a %s tool, whatever its case', (name, kind) => {
    expect(toolRule(name)?.kind).toBe(kind)
    expect(toolRule(name.toUpperCase())?.kind).toBe(kind)
  })

  it('takes a tool named `patch` as carrying patch text, not as a write with a path', () => {
    const rule = toolRule('patch')
    expect(rule?.kind).toBe('patch')
    expect(rule?.textFields).toContain('patch')
  })

  it('knows nothing of a tool it has no rule for', () => {
    expect(toolRule('TodoWrite')).toBeUndefined()
    expect(toolRule('')).toBeUndefined()
  })

  it('gives every rule what its kind needs: paths for files, a sub-command for editors, text for shells and patches', () => {
    for (const rule of TOOL_CATALOG) {
      if (rule.kind === 'write' || rule.kind === 'read' || rule.kind === 'open') expect(rule.pathFields?.length, rule.kind).toBeGreaterThan(0)
      if (rule.kind === 'editor') expect([rule.commandField, rule.writes?.length, rule.reads?.length].every(Boolean)).toBe(true)
      if (rule.kind === 'shell' || rule.kind === 'patch') expect(rule.textFields?.length, rule.kind).toBeGreaterThan(0)
    }
  })
})
