import { describe, expect, it } from 'vitest'
import { HangUp } from '../../src/server/proxy/forward.js'

describe("HangUp: a client's hang-up told to what is being done for it", () => {
  it('tells the upstream request as an EventEmitter (undici takes one) and aborts a signal asked for before', () => {
    const hangUp = new HangUp()
    const signal = hangUp.signal
    const heard: string[] = []
    hangUp.on('abort', () => heard.push('emitter'))
    signal.addEventListener('abort', () => heard.push('signal'))
    expect(hangUp.aborted).toBe(false)
    expect(signal.aborted).toBe(false)
    hangUp.abort()
    hangUp.abort()
    expect(hangUp.aborted).toBe(true)
    expect(signal.aborted).toBe(true)
    // once each, however often the connection's close is heard
    expect(heard.sort()).toEqual(['emitter', 'signal'])
  })

  it('gives a signal asked for after the client has gone already aborted, and the same one every time', () => {
    const hangUp = new HangUp()
    hangUp.abort()
    expect(hangUp.signal.aborted).toBe(true)
    expect(hangUp.signal).toBe(hangUp.signal)
  })
})
