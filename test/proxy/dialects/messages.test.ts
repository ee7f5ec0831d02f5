import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../../src/proxy/body.js'
import { messagesDialect } from '../../../src/proxy/dialects/messages.js'
import { assistant, call, result, results, user } from '../../helpers/history.js'

const body = (value: object): ProxiedBody => new ProxiedBody(Buffer.from(JSON.stringify(value)))

describe("the Messages API's dialect", () => {
  it('reads the body into the core’s parts and writes back the messages it is given, the rest of the body as sent', () => {
    const dialect = messagesDialect('messages')
    const sent = { model: 'claude-any', max_tokens: 10, system: 'Be brief.', messages: [user('Hello'), assistant('Hi'), user('Go on')] }
    const read = dialect.read(body(sent), () => true)
    expect('parts' in read && read.parts.messages).toEqual(sent.messages)
    const written = JSON.parse(dialect.write(body(sent), undefined, { messages: [user('Summary'), user('Go on')], keptFrom: 2, clips: [] }).toString('utf8'))
    expect(written).toEqual({ ...sent, messages: [user('Summary'), user('Go on')] })
    // with the recall tool offered, the tool is written after the client's own
    const offered = JSON.parse(
      dialect.write(body({ ...sent, tools: [{ name: 'bash', input_schema: { type: 'object' } }] }), undefined, undefined, undefined, true).toString('utf8')
    )
    expect(offered.tools.map((t: { name: string }) => t.name)).toEqual(['bash', 'gateway_recall'])
  })

  it("turns `enabled` thinking off where the rewrite left an open tool loop's last turn without its thinking (a model with the prefix check)", () => {
    const dialect = messagesDialect('messages')
    const loop = [user('Fix it'), assistant(call('t1', 'bash', { command: 'ls' })), results(result('t1', 'a.ts'))]
    const sent = { model: 'claude-opus-5-5', max_tokens: 10, thinking: { type: 'enabled', budget_tokens: 1_024 }, messages: loop }
    const forwarded = { messages: loop, keptFrom: 0, clips: [] }
    expect(JSON.parse(dialect.write(body(sent), undefined, forwarded).toString('utf8')).thinking).toEqual({ type: 'disabled' })
    // an earlier model, or adaptive thinking, is sent as it came
    expect(JSON.parse(dialect.write(body({ ...sent, model: 'claude-sonnet-4-5' }), undefined, forwarded).toString('utf8')).thinking).toEqual(sent.thinking)
    expect(JSON.parse(dialect.write(body({ ...sent, thinking: { type: 'adaptive' } }), undefined, forwarded).toString('utf8')).thinking).toEqual({
      type: 'adaptive'
    })
  })

  it('bills and summarizes only where it generates: a token count has neither', () => {
    const generation = messagesDialect('messages')
    const count = messagesDialect('count_tokens')
    expect(generation.usage).toBe('messages')
    expect(generation.clientSummarizer).toBeTypeOf('function')
    expect(count.usage).toBeUndefined()
    expect(count.clientSummarizer).toBeUndefined()
    for (const d of [generation, count]) expect(d).toMatchObject({ contextManagement: true, recallTool: 'messages' })
  })
})
