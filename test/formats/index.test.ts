import { describe, expect, it } from 'vitest'
import { chatRules } from '../../src/formats/chat.js'
import { FORMATS, rulesOf } from '../../src/formats/index.js'
import { responsesRules } from '../../src/formats/responses.js'
import { geminiRules } from '../../src/formats/gemini.js'

describe('formats', () => {
  it('has the rules of each format other than the Messages API’s', () => {
    expect(FORMATS).toEqual(['anthropic', 'openai-chat', 'openai-responses', 'gemini'])
    expect(rulesOf('openai-chat')).toBe(chatRules)
    expect(rulesOf('openai-responses')).toBe(responsesRules)
    expect(rulesOf('gemini')).toBe(geminiRules)
  })
})
