import { describe, expect, it } from 'vitest'
import { bodyReader, checkCompactValue, compiledCheck, readCompactRequest, routeValidatorCompiler } from '../../src/contract/validation.js'
import { CompactRequestChecked } from '../../src/contract/schemas.js'

const read = bodyReader(CompactRequestChecked)
function problem(body: unknown): { message: string; path?: string } {
  const checked = read(body)
  if (checked.ok) throw new Error('the body was taken')
  return { message: checked.message, path: checked.path }
}
const history = [{ role: 'user', content: 'hi' }]

describe('describeValidation', () => {
  it('names the place of a wrong value in the client’s terms', () => {
    expect(problem({ messages: [{ role: 'robot', content: 'x' }] })).toEqual({
      message: 'body.messages[0].role must be one of "user", "assistant", "system"',
      path: '/messages/0/role'
    })
  })

  it('lists what each branch of a union would take', () => {
    expect(problem({ messages: history, budget_tokens: 'lots' }).message).toBe('body.budget_tokens must be an integer or "off"')
    expect(problem({ messages: history, budget_tokens: 10 }).message).toMatch(/^body\.budget_tokens must be at least 1000/)
  })

  it('names an unknown field and a missing one', () => {
    expect(problem({ messages: history, budget: 5 })).toEqual({ message: 'body.budget is not a known field', path: '/budget' })
    expect(problem({})).toEqual({ message: 'body needs the field `messages`', path: '/' })
  })

  it('says what a block is when a block lacks its type', () => {
    const p = problem({ messages: [{ role: 'user', content: [{ text: 'no type' }] }] })
    expect(p.path).toBe('/messages/0/content/0')
    expect(p.message).toMatch(/^body\.messages\[0\]\.content\[0\] has no `type`: a block is an object whose `type` is one of text, /)
  })

  it('accepts what the contract allows, every other field of a message or block passing through', () => {
    const body = { messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }], extra: 1 }] }
    expect(read(body)).toEqual({ ok: true, value: body })
  })
})

describe('routeValidatorCompiler', () => {
  it('lets a query string’s text meet an integer schema, and refuses what is no integer', () => {
    const check = routeValidatorCompiler({ schema: { type: 'object', properties: { limit: { type: 'integer', minimum: 1 } } }, httpPart: 'querystring' })
    const query: Record<string, unknown> = { limit: '20' }
    expect(check(query)).toBe(true)
    expect(query.limit).toBe(20)
    expect(check({ limit: 'many' })).toBe(false)
    expect(check({ limit: '0' })).toBe(false)
  })

  it('checks a body as the body readers do: its text never coerced, Infinity no number, nothing stripped', () => {
    const schema = { type: 'object', properties: { k: { type: 'integer' } }, additionalProperties: false }
    const check = routeValidatorCompiler({ schema, httpPart: 'body' })
    expect(check({ k: '20' })).toBe(false)
    expect(check({ k: Infinity })).toBe(false)
    const extra: Record<string, unknown> = { k: 1, more: true }
    expect(check(extra)).toBe(false)
    expect(extra).toEqual({ k: 1, more: true })
    expect(check({ k: 20 })).toBe(true)
  })

  it('compiles each schema once a process, for its routes and its readers alike', () => {
    const schema = { type: 'object', properties: { n: { type: 'string' } } }
    expect(routeValidatorCompiler({ schema, httpPart: 'body' })).toBe(compiledCheck(schema))
    expect(routeValidatorCompiler({ schema, httpPart: 'params' })).toBe(compiledCheck(schema, 'url'))
    expect(compiledCheck(schema)).not.toBe(compiledCheck(schema, 'url'))
  })
})

describe('a /v1/compact body read from bytes and one made of what was read already', () => {
  it('are checked alike: the same body taken, the same problems at the same places', () => {
    const bodies: unknown[] = [
      { messages: history, mode: 'manual' },
      { messages: [{ role: 'robot', content: 'x' }] },
      { messages: history, extra: 1 },
      JSON.parse('{"messages":[{"role":"user","content":"x","__proto__":{"polluted":true}}]}'),
      { messages: [{ role: 'user', content: [{ type: 'text', text: 'x', deep: JSON.parse(`${'['.repeat(200)}${']'.repeat(200)}`) }] }] }
    ]
    for (const body of bodies) {
      const fromBytes = readCompactRequest(Buffer.from(JSON.stringify(body)))
      const made = checkCompactValue(body)
      expect(made.ok, JSON.stringify(body).slice(0, 60)).toBe(fromBytes.ok)
      if (!made.ok && !fromBytes.ok) expect([made.message, made.path]).toEqual([fromBytes.message, fromBytes.path])
      if (made.ok && fromBytes.ok) expect(made.body).toEqual(fromBytes.body)
    }
  })
})
