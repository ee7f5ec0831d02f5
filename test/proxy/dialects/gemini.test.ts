import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../../src/proxy/body.js'
import { geminiDialect, geminiMethod, inGeminiErrorShape, withoutKey } from '../../../src/proxy/dialects/gemini.js'

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

describe("Gemini's wire", () => {
  it("reads a model's method from its path, and serves generateContent, streamGenerateContent and countTokens only", () => {
    expect(geminiMethod('gemini-2.5-pro:streamGenerateContent')).toEqual({
      model: 'gemini-2.5-pro',
      method: 'streamGenerateContent',
      endpoint: 'gemini_stream'
    })
    expect(geminiMethod('gemini-2.5-flash:generateContent').endpoint).toBe('gemini_generate')
    expect(geminiMethod('gemini-2.5-flash:countTokens').endpoint).toBe('gemini_count_tokens')
    // a model name may hold a colon: the method is what follows the last one
    expect(geminiMethod('tunedModels/a:b:generateContent')).toMatchObject({ model: 'tunedModels/a:b', method: 'generateContent' })
    expect(geminiMethod('gemini-2.5-pro:embedContent')).toMatchObject({ method: 'embedContent', endpoint: undefined })
    expect(geminiMethod('gemini-2.5-pro').endpoint).toBeUndefined()
    expect(geminiMethod(':generateContent').endpoint).toBeUndefined()
    expect(geminiMethod('m:constructor').endpoint).toBeUndefined()
  })

  it("leaves the client's key out of the query it forwards, and every other parameter in", () => {
    expect(withoutKey('/v1beta/models/m:streamGenerateContent?alt=sse&key=AIzaSy-client')).toBe('?alt=sse')
    expect(withoutKey('/v1beta/models/m:generateContent?key=AIzaSy-client')).toBe('')
    expect(withoutKey('/v1beta/models')).toBe('')
    expect(withoutKey('/v1beta/models?pageSize=5&pageToken=t')).toBe('?pageSize=5&pageToken=t')
  })

  it("answers the gateway's refusals in Google's error shape: the code, the message with its place, the status's name", () => {
    expect(JSON.parse(inGeminiErrorShape(429, { message: 'rate limited' }))).toEqual({
      error: { code: 429, message: 'rate limited', status: 'RESOURCE_EXHAUSTED' }
    })
    expect(JSON.parse(inGeminiErrorShape(400, { message: 'contents[3] answers no call', path: '/contents/3' }))).toEqual({
      error: { code: 400, message: 'contents[3] answers no call (at /contents/3)', status: 'INVALID_ARGUMENT' }
    })
    expect(JSON.parse(inGeminiErrorShape(401, { message: 'no key' })).error.status).toBe('UNAUTHENTICATED')
    expect(JSON.parse(inGeminiErrorShape(418, { message: 'x' })).error.status).toBe('INVALID_ARGUMENT')
    expect(JSON.parse(inGeminiErrorShape(599, { message: 'x' })).error.status).toBe('INTERNAL')
  })
})
