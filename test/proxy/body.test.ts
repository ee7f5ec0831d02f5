import { describe, expect, it } from 'vitest'
import { ProxiedBody } from '../../src/proxy/body.js'
import { InvalidRequestError } from '../../src/contract/errors.js'

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
})
