import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../../src/proxy/body.js'
import { geminiDialect } from '../../../src/proxy/dialects/gemini.js'

const body = (value: object): ProxiedBody => new ProxiedBody(Buffer.from(JSON.stringify(value)))

const request = {
  systemInstruction: { parts: [{ text: 'Be brief.' }] },
  contents: [
    { role: 'user', parts: [{ text: 'List the files' }] },
    { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'run_shell_command', args: { command: 'ls' } }, thoughtSignature: 'c2ln' }] },
    { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'run_shell_command', response: { output: 'a.ts' } } }] },
    { role: 'user', parts: [{ text: 'Go on' }] }
  ]
}

describe("Gemini's API's dialect", () => {
  it("reads contents into the core's turns, writes them back as sent, places a problem at the client's content, and offers the recall tool", () => {
    const dialect = geminiDialect('gemini-test', 'gemini_generate')
    const read = dialect.read(body(request), () => true)
    if (!('read' in read)) throw new Error('not read')
    expect(read.parts.messages.length).toBeGreaterThan(0)
    expect(dialect.place!(read.read, '/messages/1/content/0')).toBe('/contents/1')
    const written = JSON.parse(dialect.write(body(request), read.read, undefined, undefined, true).toString('utf8'))
    expect(written.contents).toEqual(request.contents)
    expect(JSON.stringify(written.tools)).toContain('gateway_recall')
    expect(dialect.answerAt!(read.read)).toBe(request.contents.length)
  })

  it('bills and summarizes a generation, not a token count', () => {
    expect(geminiDialect('gemini-test', 'gemini_generate')).toMatchObject({ usage: 'gemini', recallTool: 'gemini' })
    expect(geminiDialect('gemini-test', 'gemini_stream').clientSummarizer).toBeTypeOf('function')
    const count = geminiDialect('gemini-test', 'gemini_count_tokens')
    expect(count.usage).toBeUndefined()
    expect(count.clientSummarizer).toBeUndefined()
  })
})
