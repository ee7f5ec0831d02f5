/**
 * `npm run eval [folder]`: the compaction pipeline over a folder of transcripts, one row each, with the
 * invariants checked, a second round of compaction, the recall of the files of the final diff, and the
 * span rendering compared with a plain 2,000-character clip of each tool output.
 */
import {
  DEFAULT_RENDER,
  type Message,
  finishCompaction,
  isToolResult,
  messageTokens,
  planCompaction,
  readLedger,
  renderSpan,
  safeBoundaries,
  spanText,
  textTokens,
  toolResultText,
  validateHistory
} from '../src/compaction/index.js'
import { rulesetRanges } from '../src/secrets/index.js'
import { corpusDir, loadCorpus, short, table } from './corpus.js'
import { type Quality, quality } from './quality.js'
import { recallFacts } from './recall.js'
import { sessionsEval } from './sessions.js'
import { compactionRedactors } from '../src/secrets/index.js'
import { spanMemory } from '../src/service/compact.js'
import { SqliteStore } from '../src/storage/sqlite.js'

/** Every text of a history a summary or the model could see: prompts, assistant text, tool inputs and outputs. */
function historyTexts(messages: Message[]): string[] {
  const out: string[] = []
  for (const m of messages) {
    if (typeof m.content === 'string') out.push(m.content)
    else
      for (const b of m.content) {
        if (b.type === 'text' && typeof b.text === 'string') out.push(b.text)
        else if (b.type === 'tool_use') out.push(JSON.stringify(b.input ?? {}))
        else if (isToolResult(b)) out.push(toolResultText(b))
      }
  }
  return out
}

/** Characters the service's redaction would replace, and by which kinds; the corpus holds no real secrets. */
function redactedShare(messages: Message[]): { chars: number; redacted: number; kinds: Map<string, number> } {
  let chars = 0
  let redacted = 0
  const kinds = new Map<string, number>()
  for (const text of historyTexts(messages)) {
    chars += text.length
    const seen: boolean[] = []
    for (const r of rulesetRanges(text)) {
      kinds.set(r.kind, (kinds.get(r.kind) ?? 0) + 1)
      for (let i = r.start; i < r.end; i++) {
        if (seen[i]) continue
        seen[i] = true
        redacted++
      }
    }
  }
  return { chars, redacted, kinds }
}

const BUDGET = 45_000
const KEEP_TOKENS = Math.floor(BUDGET / 3)

/** Lines that say what failed; counted independently of the renderer's own signal rule. */
const FAILURE_LINE =
  /Traceback \(most recent call last\)|\b\w*(?:Error|Exception)\b:|\bFAILED\b|\bFAIL\b|^E {2,}\S|assert(?:ion)?\b.*(?:failed|!=|==)|exit (?:code|status) [1-9]/i

function failureLines(span: Message[]): Set<string> {
  const lines = new Set<string>()
  for (const m of span) {
    if (typeof m.content === 'string') continue
    for (const b of m.content) {
      if (!isToolResult(b)) continue
      for (const line of toolResultText(b).split('\n')) {
        const t = line.trim()
        if (t.length > 3 && t.length <= 300 && FAILURE_LINE.test(t)) lines.add(t)
      }
    }
  }
  return lines
}

function survivors(lines: Set<string>, rendered: string): number {
  let n = 0
  for (const l of lines) if (rendered.includes(l)) n++
  return n
}

function compact(messages: Message[], system?: string) {
  const plan = planCompaction({
    messages,
    system,
    mode: 'manual',
    budgetTokens: BUDGET,
    sizingBudgetTokens: BUDGET,
    keepTokens: KEEP_TOKENS,
    keepTurns: 8,
    dryRun: false
  })
  return { plan, out: plan.summarize ? finishCompaction(plan, { id: 'cmp_eval' }) : undefined }
}

function invariantsHold(input: Message[], out: NonNullable<ReturnType<typeof compact>['out']>): string[] {
  const broken: string[] = []
  const messages = out.messages!
  if (validateHistory(messages)) broken.push('adjacency/roles')
  if (!safeBoundaries(input).includes(out.kept_from)) broken.push('safe boundary')
  // messages[0] is the summary turn, or the tail's first user message with the summary put before it;
  // everything after it must be the client's own messages, clips aside.
  const first = out.kept_from + (input[out.kept_from]!.role === 'assistant' ? 0 : 1)
  const tail = messages.slice(1)
  const clipped = new Set(out.clips.map((c) => c.message_index))
  input.slice(first).forEach((m, k) => {
    if (!clipped.has(first + k) && JSON.stringify(m) !== JSON.stringify(tail[k])) broken.push(`tail changed at ${first + k}`)
  })
  const keptTokens = messageTokens(input.slice(out.kept_from), 1).reduce((a, b) => a + b, 0)
  if (out.clips.length === 0 && keptTokens > KEEP_TOKENS) broken.push('keep_tokens')
  if (out.stats.context_after_compaction > BUDGET) broken.push('budget')
  return broken
}

function roundTwo(first: NonNullable<ReturnType<typeof compact>['out']>): string {
  const second = compact(first.messages!).out
  // The result is a single message (the summary before the user's last prompt): nothing left to fold.
  if (!second) return 'ok (nothing to compact)'
  const files = [...first.summary!.sections.files_modified, ...first.summary!.sections.files_inspected].map((i) => i.split(' — ')[0]!)
  const lost = files.filter((f) => !second.summary!.text.includes(f))
  const nested = (JSON.stringify(second.messages).match(/<compaction-summary /g) ?? []).length !== 1
  if (lost.length === 0 && !nested) return `ok (${files.length} files)`
  return `${lost.length ? `lost ${lost.length}` : ''}${nested ? ' nested' : ''}`.trim()
}

const dir = corpusDir(process.argv[2])
const transcripts = loadCorpus(dir)
const rows: (string | number)[][] = []
const renderRows: (string | number)[][] = []
const totals = {
  messages: 0,
  raw: 0,
  kept: 0,
  summary: 0,
  after: 0,
  held: 0,
  round2: 0,
  gtFound: 0,
  gtTotal: 0,
  signalTokens: 0,
  plainTokens: 0,
  failures: 0,
  signalKept: 0,
  plainKept: 0
}

for (const t of transcripts) {
  const { plan, out } = compact(t.messages, t.system)
  if (!out) {
    rows.push([short(t.name), t.messages.length, plan.rawHistoryTokens, '-', '-', '-', plan.reason, '-', '-'])
    continue
  }
  const broken = invariantsHold(t.messages, out)
  const r2 = roundTwo(out)
  const span = t.messages.slice(0, out.kept_from)
  const ledger = readLedger(span)
  const named = [...ledger.filesModified.map((f) => f.path), ...ledger.filesRead]
  const gt = t.metadata?.ground_truth?.files_in_final_diff
  let recall = '-'
  if (gt && gt.length > 0) {
    const found = gt.filter((f) => named.some((p) => p === f || p.endsWith(`/${f}`))).length
    totals.gtFound += found
    totals.gtTotal += gt.length
    recall = `${found}/${gt.length}`
  }
  rows.push([
    short(t.name),
    t.messages.length,
    out.stats.raw_history_tokens,
    out.stats.kept_tokens,
    out.stats.summary_tokens,
    out.stats.context_after_compaction,
    broken.length ? broken.join(', ') : 'yes',
    r2,
    recall
  ])
  totals.messages += t.messages.length
  totals.raw += out.stats.raw_history_tokens
  totals.kept += out.stats.kept_tokens
  totals.summary += out.stats.summary_tokens
  totals.after += out.stats.context_after_compaction
  if (broken.length === 0) totals.held++
  if (r2.startsWith('ok')) totals.round2++

  const signal = spanText(renderSpan(span))
  const plain = spanText(renderSpan(span, 0, { ...DEFAULT_RENDER, clip: 'plain', toolOutputHead: 2_000 }))
  const failures = failureLines(span)
  const s = survivors(failures, signal)
  const p = survivors(failures, plain)
  renderRows.push([short(t.name), textTokens(signal), textTokens(plain), failures.size, s, p])
  totals.signalTokens += textTokens(signal)
  totals.plainTokens += textTokens(plain)
  totals.failures += failures.size
  totals.signalKept += s
  totals.plainKept += p
}

const n = transcripts.length
rows.push([
  `TOTAL (${n})`,
  totals.messages,
  totals.raw,
  totals.kept,
  totals.summary,
  totals.after,
  `${totals.held}/${n}`,
  `${totals.round2}/${n}`,
  totals.gtTotal ? `${totals.gtFound}/${totals.gtTotal} (${((100 * totals.gtFound) / totals.gtTotal).toFixed(0)}%)` : '-'
])
renderRows.push([
  `TOTAL (${n})`,
  totals.signalTokens,
  totals.plainTokens,
  totals.failures,
  `${totals.signalKept} (${((100 * totals.signalKept) / Math.max(1, totals.failures)).toFixed(0)}%)`,
  `${totals.plainKept} (${((100 * totals.plainKept) / Math.max(1, totals.failures)).toFixed(0)}%)`
])

let secretChars = 0
let secretRedacted = 0
const secretKinds = new Map<string, number>()
const secretRows: (string | number)[][] = []
for (const t of transcripts) {
  const r = redactedShare(t.messages)
  secretChars += r.chars
  secretRedacted += r.redacted
  for (const [k, v] of r.kinds) secretKinds.set(k, (secretKinds.get(k) ?? 0) + v)
  if (r.redacted > 0)
    secretRows.push([short(t.name), r.chars, r.redacted, `${((100 * r.redacted) / r.chars).toFixed(4)}%`, [...r.kinds].map(([k, v]) => `${k} ${v}`).join(', ')])
}
secretRows.push([
  `TOTAL (${transcripts.length})`,
  secretChars,
  secretRedacted,
  `${((100 * secretRedacted) / Math.max(1, secretChars)).toFixed(4)}%`,
  [...secretKinds].map(([k, v]) => `${k} ${v}`).join(', ') || '-'
])

console.log(`corpus: ${dir} (${n} transcripts); mode manual, budget ${BUDGET}, keep_tokens ${KEEP_TOKENS}, keep_turns 8, extractive summarizer\n`)
console.log(
  table(['transcript', 'messages', 'raw tokens', 'kept tokens', 'summary tokens', 'context after', 'invariants', 'round two', 'diff-file recall'], rows)
)
console.log('\nspan rendering: signal-keeping clip vs a plain 2,000-character clip of each tool output\n')
console.log(table(['transcript', 'tokens (signal clip)', 'tokens (plain clip)', 'failure lines', 'kept (signal clip)', 'kept (plain clip)'], renderRows))
const qualities: [string, Quality][] = []
for (const t of transcripts) {
  const q = quality(t.messages)
  if (q) qualities.push([t.name, q])
}
const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(0)}%`)
const qualityRows = qualities.map(([name, q]) => [
  short(name),
  q.objectiveReal ? 'yes' : 'NO',
  `${q.tracebacksWithException}/${q.tracebacks}`,
  q.duplicateErrors,
  q.emptySearchErrors,
  `${q.failingTestsNamed}/${q.failingTests}`,
  q.singleTask ? (q.objectiveSteady ? 'yes' : 'NO') : q.objectiveSteady ? '(yes)' : '(no)',
  q.workStood,
  `${(100 * q.requestShare).toFixed(0)}%`,
  `${q.declinedAsFailures}/${q.declined}`,
  q.emptyFiles,
  q.filesTwice
])
const sum = (f: (q: Quality) => number): number => qualities.reduce((n, [, q]) => n + f(q), 0)
const single = qualities.filter(([, q]) => q.singleTask)
const shares = qualities.map(([, q]) => q.requestShare).sort((a, b) => a - b)
const q = {
  real: sum((x) => (x.objectiveReal ? 1 : 0)),
  tb: sum((x) => x.tracebacks),
  tbOk: sum((x) => x.tracebacksWithException),
  dup: sum((x) => x.duplicateErrors),
  empty: sum((x) => x.emptySearchErrors),
  tests: sum((x) => x.failingTests),
  named: sum((x) => x.failingTestsNamed),
  steady: single.filter(([, x]) => x.objectiveSteady).length,
  stood: sum((x) => (x.workStood === 1 ? 1 : 0)),
  declined: sum((x) => x.declined),
  declinedFailed: sum((x) => x.declinedAsFailures),
  emptyFiles: sum((x) => x.emptyFiles),
  filesTwice: sum((x) => x.filesTwice)
}
qualityRows.push([
  `TOTAL (${qualities.length})`,
  `${q.real}/${qualities.length}`,
  `${q.tbOk}/${q.tb}`,
  q.dup,
  q.empty,
  `${q.named}/${q.tests}`,
  `${q.steady}/${single.length}`,
  `${q.stood}/${qualities.length}`,
  `median ${(100 * (shares[shares.length >> 1] ?? 0)).toFixed(0)}%`,
  `${q.declinedFailed}/${q.declined}`,
  q.emptyFiles,
  q.filesTwice
])
console.log("\nextractive summary quality (the eval's own rules); objective over three rounds in parentheses for runs of several tasks\n")
console.log(
  table(
    [
      'transcript',
      'objective real',
      'tracebacks with exception',
      'duplicate errors',
      'empty searches as errors',
      'failing tests named',
      'objective steady',
      'work stood entries',
      'requests share',
      'declined calls as failures',
      'empty file entries',
      'paths twice'
    ],
    qualityRows
  )
)
const verdict = (ok: boolean): string => (ok ? 'meets' : 'misses')
console.log(
  [
    `targets: objective real ${pct(q.real, qualities.length)} (100%: ${verdict(q.real === qualities.length)})`,
    `tracebacks with their exception ${pct(q.tbOk, q.tb)} (≥ 95%: ${verdict(q.tb === 0 || q.tbOk / q.tb >= 0.95)})`,
    `duplicate errors ${q.dup} (0: ${verdict(q.dup === 0)})`,
    `empty searches as errors ${q.empty} (0: ${verdict(q.empty === 0)})`,
    `failing tests named ${pct(q.named, q.tests)} (≥ 95%: ${verdict(q.tests === 0 || q.named / q.tests >= 0.95)})`,
    `objective steady over three rounds on single-task runs ${pct(q.steady, single.length)} (100%: ${verdict(q.steady === single.length)})`,
    `one "where the work stood" ${pct(q.stood, qualities.length)} (100%: ${verdict(q.stood === qualities.length)})`,
    `calls the user declined listed as failures ${q.declinedFailed} of ${q.declined} (0: ${verdict(q.declinedFailed === 0)})`,
    `file entries with no path ${q.emptyFiles} (0: ${verdict(q.emptyFiles === 0)}), paths listed under two spellings ${q.filesTwice} (0: ${verdict(q.filesTwice === 0)})`
  ].join('\n')
)

sessionsEval(transcripts)

// The cold layer: facts of each removed span found again by a few of their words (recall@5), each session in a
// store of its own and all of them in one store (a session ranks alone as beside others), and recall@10 against
// plain BM25 computed here over the same passages (the bench's own, from the entries' texts).
const recallRows: (string | number)[][] = []
const tally = { facts: 0, found: 0, plain: 0, plainFound: 0, shared: 0, at10: 0, bm25at10: 0, bytes: 0, digestBytes: 0 }
const shared = new SqliteStore(':memory:')
const sessions: { name: string; facts: ReturnType<typeof recallFacts>; entries: { text: string; messages: [number, number] }[] }[] = []
const answers = (f: ReturnType<typeof recallFacts>[number], r: { text: string; messages: [number, number] }): boolean =>
  f.inText ? r.text.includes(f.text) : r.messages[0] <= f.message && f.message <= r.messages[1]
for (const t of transcripts) {
  const redactors = compactionRedactors()
  const plan = planCompaction(
    { messages: t.messages, mode: 'manual', budgetTokens: BUDGET, sizingBudgetTokens: BUDGET, keepTokens: KEEP_TOKENS, keepTurns: 8, dryRun: false },
    redactors
  )
  if (!plan.summarize) continue
  const out = finishCompaction(plan, { id: 'cmp_recall', recallTool: { tool: 'recall' } }, redactors)
  const store = new SqliteStore(':memory:')
  const memory = spanMemory(plan, t.messages, out.clips, redactors)
  const owner = { compaction_id: 'cmp_recall', session_id: 's', key_name: '', created_at: new Date().toISOString() }
  await store.saveMemory(owner, memory)
  await shared.saveMemory({ ...owner, session_id: t.name }, memory)
  for (const e of memory) {
    const bytes = Buffer.byteLength(e.text)
    tally.bytes += bytes
    if (e.kind !== 'output' && e.kind !== 'call') tally.digestBytes += bytes
  }
  const facts = recallFacts(plan.span)
  sessions.push({ name: t.name, facts, entries: memory.map((e) => ({ text: e.text, messages: [e.from, e.to] })) })
  const found: typeof facts = []
  for (const f of facts) {
    const hits = await store.recall('s', '', { text: f.query, limit: 10 })
    if (hits.slice(0, 5).some((r) => answers(f, r))) found.push(f)
    if (hits.some((r) => answers(f, r))) tally.at10++
  }
  await store.close()
  tally.facts += facts.length
  tally.found += found.length
  tally.plain += facts.filter((f) => f.kind === 'plain output line').length
  tally.plainFound += found.filter((f) => f.kind === 'plain output line').length
  const missed = facts.filter((f) => !found.includes(f)).map((f) => `${f.kind}: "${f.query}"`)
  recallRows.push([short(t.name), facts.length, found.length, missed.join('; ') || '-'])
}
// the same facts searched in the store that holds every session, and with plain BM25 over each session's passages
for (const s of sessions) {
  for (const f of s.facts) {
    if ((await shared.recall(s.name, '', { text: f.query, limit: 5 })).some((r) => answers(f, r))) tally.shared++
    if (plainBm25(s.entries, f.query, 10).some((r) => answers(f, r))) tally.bm25at10++
  }
}
await shared.close()
recallRows.push([`TOTAL (${recallRows.length})`, tally.facts, tally.found, `recall@5 ${pct(tally.found, tally.facts)}`])
console.log(
  '\ncold layer: facts of the removed span (a late sentence of an early request, an exception line, a signal line a command that succeeded printed, a later line of a multi-line command, a command, plain lines of tool outputs) searched by a few of their rarest words\n'
)
console.log(table(['transcript', 'facts', 'found in top 5', 'missed'], recallRows))
console.log(`target: recall@5 ≥ 95%: ${pct(tally.found, tally.facts)}, ${verdict(tally.facts === 0 || tally.found / tally.facts >= 0.95)}`)
console.log(
  `target: recall@5 of plain output lines ≥ 95%: ${pct(tally.plainFound, tally.plain)} (${tally.plainFound}/${tally.plain}), ${verdict(tally.plain === 0 || tally.plainFound / tally.plain >= 0.95)}`
)
console.log(
  `target: a session's recall@5 the same alone and beside the other ${sessions.length - 1} sessions: ${pct(tally.found, tally.facts)} alone, ${pct(tally.shared, tally.facts)} beside them, ${verdict(tally.found === tally.shared)}`
)
console.log(
  `stored: the cold layer of the ${sessions.length} spans holds ${(tally.bytes / 1024).toFixed(0)} KiB of text whole, against ${(tally.digestBytes / 1024).toFixed(0)} KiB for the asks, answers and digest alone (${(tally.bytes / Math.max(1, tally.digestBytes)).toFixed(1)}x)`
)
console.log(
  `target: recall@10 at least plain BM25's over the same passages: ${pct(tally.at10, tally.facts)} (${tally.at10}/${tally.facts}) against ${pct(tally.bm25at10, tally.facts)} (${tally.bm25at10}/${tally.facts}), ${verdict(tally.at10 >= tally.bm25at10)}`
)

console.log('\nfalse positives: characters the redaction (own patterns + secretlint preset) would replace; the corpus holds no real secrets\n')
console.log(table(['transcript', 'characters', 'redacted', 'share', 'kinds'], secretRows))
if (totals.held !== n - rows.filter((r) => r[3] === '-').length) process.exitCode = 1

/**
 * Plain Okapi BM25 (k1 1.2, b 0.75) over one session's passages, written here from the textbook rather than
 * taken from the store: words split at anything but letters and digits, lower-cased, nothing else done.
 */
function plainBm25<E extends { text: string }>(entries: readonly E[], query: string, limit: number): E[] {
  const tokens = (text: string): string[] =>
    text
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((w) => w.length >= 2)
  const docs = entries.map((e) => tokens(e.text))
  const mean = docs.reduce((n, d) => n + d.length, 0) / Math.max(1, docs.length)
  const terms = [...new Set(tokens(query))]
  const df = terms.map((t) => docs.filter((d) => d.includes(t)).length)
  const scored = docs.map((d, i) => {
    let score = 0
    terms.forEach((t, q) => {
      const f = d.filter((w) => w === t).length
      if (f === 0) return
      const idf = Math.log(1 + (docs.length - (df[q] ?? 0) + 0.5) / ((df[q] ?? 0) + 0.5))
      score += (idf * f * 2.2) / (f + 1.2 * (0.25 + (0.75 * d.length) / mean))
    })
    return { i, score }
  })
  return scored
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || b.i - a.i)
    .slice(0, limit)
    .map((s) => entries[s.i]!)
}
