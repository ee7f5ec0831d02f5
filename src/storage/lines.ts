/**
 * A recall's second look: the cold layer's passages are lines (a log's, a file's), and what is asked for is
 * most often one of them. Of the best candidates BM25 found, a passage with a line that holds more of the
 * query's words ranks higher (its score raised by up to LINE_WEIGHT for a line that holds them all); BM25
 * alone cannot see that the words stand together. Pure.
 */
import { QUESTION_WORDS } from './rank.js'
import { wordsOf } from './sealing.js'

/** How much a line that holds every word of the query raises a passage's score. */
export const LINE_WEIGHT = 0.5
/** How many candidates the stores let BM25 give for this look, for a recall of `limit`. */
export const candidatesFor = (limit: number): number => Math.max(limit * 3, 15)

/** The query's distinct words as the index reads them, question words left out where it holds anything else. */
function queryWords(text: string): Set<string> {
  const asked = wordsOf(text, QUESTION_WORDS)
  return new Set(asked.length > 0 ? asked : wordsOf(text))
}

/** The share of the query's words that the passage's best line holds. */
export function lineCoverage(text: string, words: ReadonlySet<string>): number {
  if (words.size < 2) return 0
  let best = 0
  for (const line of text.split('\n')) {
    let held = 0
    for (const w of new Set(wordsOf(line))) if (words.has(w)) held++
    if (held > best) best = held
    if (best === words.size) break
  }
  return best / words.size
}

/** Hits ranked again by their score raised by their best line's coverage of the query, best first (the order before among equals), at most `limit`. */
export function byLines<H extends { text: string; score: number }>(hits: readonly H[], query: string, limit: number): H[] {
  const words = queryWords(query)
  return hits
    .map((h, k) => ({ h, k, score: h.score * (1 + LINE_WEIGHT * lineCoverage(h.text, words)) }))
    .sort((a, b) => b.score - a.score || a.k - b.k)
    .slice(0, limit)
    .map(({ h, score }) => ({ ...h, score: Number(score.toFixed(4)) }))
}
