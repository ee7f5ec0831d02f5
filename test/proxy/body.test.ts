import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../src/proxy/body.js'
import { InvalidRequestError } from '../../src/contract/errors.js'
import { farUnderBudget } from '../../src/proxy/request.js'
import { topLevelField } from '../../src/proxy/events.js'

describe('ProxiedBody', () => {
  it('keeps the bytes as they came and parses them once, when first read', () => {
    const text = '{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1e400,"id":12345678901234567890123}'
    const body = new ProxiedBody(Buffer.from(text))
    const first = body.value()
    expect(body.value()).toBe(first)
    expect((first as { messages: unknown[] }).messages).toEqual([{ role: 'user', content: 'hi' }])
    // what is forwarded unread is the client's bytes, never a rewrite of the parsed value
    expect(body.bytes.toString()).toBe(text)
  })

  it('answers a body that is not JSON with a 400 that says where it breaks off', () => {
    const broken = new ProxiedBody(Buffer.from('{"model":"m","input":[{"role":"user","content":"a"},{"role":"user",'))
    let thrown: unknown
    try {
      broken.value('input')
    } catch (err) {
      thrown = err
    }
    expect(thrown).toBeInstanceOf(InvalidRequestError)
    expect((thrown as InvalidRequestError).status).toBe(400)
    expect((thrown as InvalidRequestError).message).toMatch(/not valid JSON.*position 67/)
  })

  it('says from its bytes alone whether it is far under a budget, as farUnderBudget does, at every budget', () => {
    const plain = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'an image of a "document", in words' }] })
    const image = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] })
    for (const text of [plain, image]) {
      const body = new ProxiedBody(Buffer.from(text))
      for (const budget of [1, 10, 100, 1_000, 100_000])
        expect(body.farUnder(budget), `${text.slice(40, 60)} at ${budget}`).toBe(farUnderBudget(body.bytes, budget))
    }
    expect(new ProxiedBody(Buffer.from(plain)).farUnder(100_000)).toBe(true)
    expect(new ProxiedBody(Buffer.from(image)).farUnder(100_000)).toBe(false)
  })

  it('takes what it knows of its blocks into a body with bytes taken out only where that cannot change it', () => {
    // an image named only in the field the gateway takes out: the body without it is far under the budget
    const text = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], context_management: { note: { type: 'image' } } })
    const body = new ProxiedBody(Buffer.from(text))
    expect(body.farUnder(100_000)).toBe(false)
    const without = body.without(topLevelField(body.bytes, 'context_management')!.without)
    expect(without.bytes.toString()).toBe('{"model":"m","messages":[{"role":"user","content":"hi"}]}')
    expect(without.farUnder(100_000)).toBe(true)
    // none in the whole: none in the part
    const plain = new ProxiedBody(Buffer.from('{"model":"m","messages":[],"context_management":{"edits":[]}}'))
    expect(plain.farUnder(100_000)).toBe(true)
    expect(plain.without(Buffer.from('{"model":"m","messages":[]}')).farUnder(100_000)).toBe(true)
  })
})
