/**
 * `npx tsx scripts/harness-seed.ts [corpus folder]`: writes src/service/harness-seed.ts, the fingerprints
 * (never the text) of the prompt lines that three or more of the corpus's transcripts send: the agents'
 * harness texts (instructions, templates, reminders). A process starts from them, so that its first
 * sessions of an agent keep none of its shared instructions as the user's words.
 */
import { writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { lineFingerprints, promptTexts } from '../src/compaction/index.js'
import { corpusDir, loadCorpus } from '../bench/corpus.js'

/** In how many transcripts a line must be for it to be a harness's. */
const MIN_TRANSCRIPTS = 3

const transcripts = loadCorpus(corpusDir(process.argv[2]))
const seen = new Map<string, number>()
for (const t of transcripts) {
  const mine = new Set<string>()
  for (const prompt of promptTexts(t.messages)) for (const { fingerprint } of lineFingerprints(prompt)) mine.add(fingerprint)
  for (const fp of mine) seen.set(fp, (seen.get(fp) ?? 0) + 1)
}
const fingerprints = [...seen]
  .filter(([, n]) => n >= MIN_TRANSCRIPTS)
  .map(([fp]) => fp)
  .sort()
const out = resolve(import.meta.dirname, '..', 'src/service/harness-seed.ts')
const lines = [
  `/** Fingerprints (never the text) of the prompt lines ${MIN_TRANSCRIPTS} or more of ${transcripts.length} agent transcripts send: harness texts. Written by scripts/harness-seed.ts. */`,
  'export const HARNESS_SEED: ReadonlySet<string> = new Set([',
  ...fingerprints.map((fp, i) => `  '${fp}'${i < fingerprints.length - 1 ? ',' : ''}`),
  '])',
  ''
]
writeFileSync(out, lines.join('\n'))
console.log(`wrote ${join('src/service', 'harness-seed.ts')}: ${fingerprints.length} fingerprints from ${transcripts.length} transcripts`)
