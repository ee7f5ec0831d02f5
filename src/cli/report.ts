import type { ResponseView } from '../service/compact.js'

function n(value: number): string {
  return value.toLocaleString('en-US')
}

/** The response of POST /v1/compact as a person reads it: the summary, then a few figures. */
export function formatReport(r: ResponseView, elapsedMs: number): string {
  const s = r.stats
  const lines: string[] = []
  const dryRun = r.reason === 'dry_run'
  if (r.compacted && r.summary) lines.push(r.summary.text, '')
  else if (r.compacted && r.reason === 'cleared') {
    const c = r.cleared
    lines.push(
      `cleared ${n(c.length)} old tool ${c.length === 1 ? 'result' : 'results'} (${n(c.reduce((t, x) => t + x.tokens, 0))} tokens): nothing was summarized`,
      ''
    )
  } else if (dryRun) {
    // what the compaction would leave: the messages a summary would replace, and the tail kept raw
    const turns = s.compacted_turns ?? 0
    const replaced = r.kept_from > 0 ? `messages 0–${r.kept_from - 1} (${n(turns)} ${turns === 1 ? 'turn' : 'turns'})` : 'nothing'
    lines.push(`dry run: a compaction would summarize ${replaced} and keep the rest raw; nothing was summarized or recorded`, '')
  } else lines.push(`not compacted: ${r.reason}`, '')
  const rows: [string, string][] = [
    ['tokens before', n(s.raw_history_tokens ?? 0)],
    dryRun ? ['kept raw tokens', n(s.kept_tokens ?? 0)] : ['tokens after', r.compacted ? n(s.context_after_compaction ?? 0) : n(s.raw_history_tokens ?? 0)],
    ['compacted turns', n(s.compacted_turns ?? 0)],
    ['kept messages', `${n(s.kept_messages ?? 0)} (from index ${r.kept_from})`]
  ]
  if (s.clipped_tool_results) rows.push(['clipped by the bound', n(s.clipped_tool_results)])
  if (r.summarizer) {
    const model = r.summarizer.model ? ` ${r.summarizer.model}` : ''
    const fallback = r.summarizer.fallback_reason ? ` (fallback: ${r.summarizer.fallback_reason})` : r.summarizer.kind === 'extractive' ? ' (chosen)' : ''
    rows.push(['summarizer', `${r.summarizer.kind}${model}${fallback}`])
  }
  rows.push(['duration', `${n(Math.round(elapsedMs))} ms`])
  const width = Math.max(...rows.map(([k]) => k.length))
  for (const [k, v] of rows) lines.push(`${k.padEnd(width)}  ${v}`)
  return lines.join('\n')
}
