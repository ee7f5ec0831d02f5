import { describe, expect, it } from 'vitest'
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

  it('names a conversation by its session, else by its first prompt', () => {
    expect(ConversationsText.conversation('sess-1', ['x'])).toBe('s:sess-1')
    expect(ConversationsText.conversation(undefined, ['first prompt'])).toBe(ConversationsText.conversation(undefined, ['first prompt', 'later']))
    expect(ConversationsText.conversation(undefined, ['first prompt'])).not.toBe(ConversationsText.conversation(undefined, ['another prompt']))
  })

  it('forgets the oldest lines past its bound', () => {
    const c = new ConversationsText(3)
    for (let i = 0; i < 5; i++) c.learn('', 's:a', [`${'distinct line number '.repeat(2)}${'x'.repeat(i + 1)}`])
    expect(c.size).toBe(3)
  })
})
