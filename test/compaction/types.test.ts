import { describe, expect, it } from 'vitest'
import {
  type Block,
  type ToolResultBlock,
  blocksOf,
  isPromptMessage,
  isTextBlock,
  isToolResult,
  isToolUse,
  toolResultText
} from '../../src/compaction/types.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

const tr = (content: string | Block[]): ToolResultBlock => ({ type: 'tool_result', tool_use_id: 't', content })

describe('message and block helpers', () => {
  it('reads string content as one text block and leaves block content as it is', () => {
    expect(blocksOf(user('hi'))).toEqual([{ type: 'text', text: 'hi' }])
    const m = assistant('a', call('t', 'Bash', { command: 'ls' }))
    expect(blocksOf(m)).toBe(m.content)
  })

  it('tells text, tool calls and tool results apart, a text block only with a string text', () => {
    expect(isTextBlock({ type: 'text', text: 'x' })).toBe(true)
    expect(isTextBlock({ type: 'text', text: 3 })).toBe(false)
    expect(isToolUse(call('t', 'Read', {}))).toBe(true)
    expect(isToolResult(result('t', 'ok'))).toBe(true)
    expect(isToolResult({ type: 'image' })).toBe(false)
  })

  it('takes a user message without tool results for a prompt, and no assistant message', () => {
    expect(isPromptMessage(user('do it'))).toBe(true)
    expect(isPromptMessage(results(result('t', 'ok')))).toBe(false)
    expect(isPromptMessage({ role: 'user', content: [{ type: 'text', text: 'and' }, result('t', 'ok')] })).toBe(false)
    expect(isPromptMessage(assistant('done'))).toBe(false)
  })

  it('reads a tool result’s text however it was sent, naming the blocks that are not text', () => {
    expect(toolResultText(tr('plain'))).toBe('plain')
    expect(
      toolResultText(
        tr([
          { type: 'text', text: 'a' },
          { type: 'image', source: {} },
          { type: 'text', text: 'b' }
        ])
      )
    ).toBe('a\n[image]\nb')
    expect(toolResultText({ type: 'tool_result', tool_use_id: 't' })).toBe('')
  })
})
