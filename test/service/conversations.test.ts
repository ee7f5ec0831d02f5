import { Worker } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { until } from '../helpers/wait.js'
import { lineFingerprints } from '../../src/compaction/index.js'
import { COMMON_IN_OTHERS, ConversationsText } from '../../src/service/conversations.js'

const LINE = 'A line long enough to be fingerprinted by the service'
const fp = (): string => lineFingerprints(LINE)[0]?.fingerprint ?? ''

describe('ConversationsText', () => {
  it('counts a line as common once two other conversations of the key sent it, a resumed one not counted twice', () => {
    expect(COMMON_IN_OTHERS).toBe(2)
    const c = new ConversationsText()
    c.learn('acme', 's:a', [LINE])
    c.learn('acme', 's:a', [LINE]) // the same conversation again
    expect(c.common('acme', 's:b')(fp())).toBe(false)
    c.learn('acme', 's:c', [LINE])
    expect(c.common('acme', 's:b')(fp())).toBe(true)
    expect(c.common('acme', 's:a')(fp())).toBe(false) // one other than itself
    expect(c.common('other', 's:b')(fp())).toBe(false) // another key saw none of it
  })

  it('learns later what learn learns now: before any look-up that follows, or once the event loop turns', async () => {
    const now = new ConversationsText()
    const later = new ConversationsText()
    for (const c of ['s:a', 's:c']) {
      now.learn('acme', c, [LINE])
      later.learnLater('acme', c, [LINE])
    }
    // looked up in the same turn: the noted prompts are learned first
    expect(later.common('acme', 's:b')(fp())).toBe(now.common('acme', 's:b')(fp()))
    expect(later.common('acme', 's:b')(fp())).toBe(true)
    const idle = new ConversationsText()
    idle.learnLater('acme', 's:a', [LINE])
    expect(idle.size).toBe(0) // noted, not learned: the answer goes first
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(idle.size).toBe(1) // learned once the loop turned, with nothing looked up
  })

  it("is the same table on every thread of an app: what one learns the others learn; another app's table learns nothing of it", async () => {
    const name = `conversations-test-${process.pid}-${Date.now()}`
    const main = new ConversationsText(undefined, undefined, name)
    const other = new ConversationsText(undefined, undefined, `${name}-another-app`)
    // a worker thread's table of the same name learns two conversations' line, as a compaction worker does
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads')
      const { BroadcastChannel } = require('node:worker_threads')
      const channel = new BroadcastChannel(workerData.name)
      for (const conversation of ['s:a', 's:c']) channel.postMessage({ keyName: 'acme', conversation, fingerprints: [workerData.fp] })
      channel.close()
      parentPort.postMessage('sent')`,
      { eval: true, workerData: { name, fp: fp() } }
    )
    await new Promise((resolve) => worker.once('message', resolve))
    await until('the main thread learned what the worker learned', () => main.common('acme', 's:b')(fp()))
    expect(other.common('acme', 's:b')(fp())).toBe(false)
    // and what the main thread learns reaches a table of its name elsewhere
    const peer = new ConversationsText(undefined, undefined, name)
    main.learn('acme', 's:x', [`${LINE} and more`])
    await until('the peer learned it', () => peer.size > 0)
    for (const t of [main, other, peer]) t.close()
    await worker.terminate()
    // closed, a table still learns (a compaction answered as its app closes), for its own thread alone
    main.learn('acme', 's:y', [`${LINE}, once closed`])
    main.learnLater('acme', 's:z', [`${LINE}, later`])
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(main.size).toBeGreaterThan(1)
  })

  it('names a conversation by its session, else by its first prompt', () => {
    expect(ConversationsText.conversation('sess-1', ['x'])).toBe('s:sess-1')
    expect(ConversationsText.conversation(undefined, ['first prompt'])).toBe(ConversationsText.conversation(undefined, ['first prompt', 'later']))
    expect(ConversationsText.conversation(undefined, ['first prompt'])).not.toBe(ConversationsText.conversation(undefined, ['another prompt']))
  })

  it('forgets the lines least recently sent past its bound, so that a line every request sends stays', () => {
    const c = new ConversationsText(3)
    const line = (i: number): string => `${'distinct line number '.repeat(2)}${'x'.repeat(i + 1)}`
    const harness = 'The harness sends this reminder line in every one of its requests'
    const harnessFp = lineFingerprints(harness)[0]?.fingerprint ?? ''
    for (const conversation of ['s:a', 's:b']) c.learn('', conversation, [harness])
    for (let i = 0; i < 5; i++) {
      c.learn('', `s:${i}`, [line(i)])
      c.learn('', `s:h${i}`, [harness]) // sent again by each new conversation
    }
    expect(c.size).toBe(3)
    expect(c.common('', 's:new')(harnessFp)).toBe(true)
    // the first one-off lines are gone: a conversation sending the first of them again is its only sender
    c.learn('', 's:again', [line(0)])
    expect(c.common('', 's:other')(lineFingerprints(line(0))[0]?.fingerprint ?? '')).toBe(false)
  })
})
