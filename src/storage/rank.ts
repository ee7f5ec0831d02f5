/**
 * A recall's ranking: plain Okapi BM25 over one session's entries, with that session's own figures (how
 * many entries it holds, their mean length, how many of them hold each term), so that a session ranks
 * the same whether the store holds nothing else or millions of other entries. No weight favours one kind
 * of entry over another; ties go to the newer entry. Pure: the stores read the figures, this scores them.
 */

/** BM25's term-frequency saturation and length normalisation, the values most systems ship with. */
export const BM25_K1 = 1.2
export const BM25_B = 0.75

/** One entry that holds at least one of the query's terms. */
export interface Candidate {
  id: number
  /** Its length in terms; null for an entry written before lengths were kept (taken as the session's mean). */
  words: number | null
  /** How often each query term (by its index in the query) occurs in it. */
  tf: ReadonlyMap<number, number>
}

/** The session's own figures: its entries and their total length in terms (of those whose length is known). */
export interface SessionFigures {
  entries: number
  meanWords: number
}

export interface Scored {
  id: number
  score: number
}

/** The candidates' BM25 scores over the session's figures, best first (newer first among equals), at most `limit`. */
export function rankBm25(candidates: readonly Candidate[], figures: SessionFigures, terms: number, limit: number): Scored[] {
  const df = new Array<number>(terms).fill(0)
  for (const c of candidates) for (const q of c.tf.keys()) if (q < terms) df[q] = (df[q] ?? 0) + 1
  const n = Math.max(figures.entries, candidates.length)
  const idf = df.map((d) => Math.log(1 + (n - d + 0.5) / (d + 0.5)))
  const mean = figures.meanWords > 0 ? figures.meanWords : 1
  const scored = candidates.map((c) => {
    const norm = BM25_K1 * (1 - BM25_B + (BM25_B * (c.words ?? mean)) / mean)
    let score = 0
    for (const [q, f] of c.tf) if (q < terms && f > 0) score += ((idf[q] ?? 0) * f * (BM25_K1 + 1)) / (f + norm)
    return { id: c.id, score }
  })
  scored.sort((a, b) => b.score - a.score || b.id - a.id)
  return scored.slice(0, limit)
}

/**
 * Words a question is made of that say nothing of what it asks for ("what did we decide about …"):
 * not searched for, unless the query holds nothing else.
 */
export const QUESTION_WORDS: ReadonlySet<string> = new Set(
  (
    'a an and are as at be been being but by can could did do does doing done for from had has have how i if in into is it its ' +
    'me my of on or our shall should so than that the their them then there these they this those to us was we were what when ' +
    'where which while who whom whose why will with would you your about after before again any all also just get got'
  ).split(' ')
)
