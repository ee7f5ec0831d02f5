import { describe, expect, it } from 'vitest'
import { lineFingerprints, promptTexts } from '../../src/compaction/index.js'
import { ConversationsText } from '../../src/service/conversations.js'
import { HARNESS_SEED } from '../../src/service/harness-seed.js'
import { allTranscripts } from '../helpers/corpus.js'

describe('the harness texts shipped with the service', () => {
  it('are fingerprints only, never text', () => {
    expect(HARNESS_SEED.size).toBeGreaterThan(0)
    for (const fp of HARNESS_SEED) expect(fp).toMatch(/^[0-9a-z]{11}$/)
  })

  it("make a fresh process take an agent's instructions for harness text from its first session on", () => {
    // a mini-swe-agent transcript of the fixtures: its template's lines are known before any traffic
    const transcript = allTranscripts().find((t) => t.name.startsWith('mini-swe-agent'))
    if (!transcript) throw new Error('the fixtures hold a mini-swe-agent transcript')
    const lines = promptTexts(transcript.messages).flatMap((p) => lineFingerprints(p))
    const fresh = new ConversationsText().common('acme', 's:first')
    const unseeded = new ConversationsText(undefined, new Set()).common('acme', 's:first')
    expect(lines.filter((l) => fresh(l.fingerprint)).length).toBeGreaterThan(10)
    expect(lines.filter((l) => unseeded(l.fingerprint))).toEqual([])
    // and the user's own lines are not among them
    const userLine = lineFingerprints('Please make the exporter keep the header row of an empty sheet')[0]!
    expect(fresh(userLine.fingerprint)).toBe(false)
  })
})
