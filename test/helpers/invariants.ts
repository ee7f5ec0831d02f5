import fc from 'fast-check'
import { expect } from 'vitest'
import {
  blocksOf,
  type Block,
  type Clip,
  type Message,
  emptySections,
  finishCompaction,
  formatSummary,
  messageTokens,
  parseSummary,
  newestOpaque,
  planCompaction,
  promptTokens,
  safeBoundaries,
  validateHistory,
  SUMMARY_FLOOR_TOKENS
} from '../../src/compaction/index.js'
import { messagesApiRefusal } from './messages-api-rules.js'

/**
 * Generated histories: turns of a prompt (string or blocks), steps of parallel tool calls with results
 * from tiny to huge, thinking blocks, an optional prior summary in front and an optional pending call.
 * Every kind of text (prompts, assistant text, thinking, tool inputs, tool results) reaches megabytes,
 * as real ones do: a bound that only holds for short texts is not a bound.
 */
/** A unit of text: plain, or full graphemes (emoji and other astral characters, so every clip point meets a surrogate pair). */
const unitText = fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }))
const sized = (min: number, max: number): fc.Arbitrary<string> =>
  // whole units repeated: a text of graphemes never ends inside a surrogate pair (the client sends
  // well-formed text, and the service must keep it so)
  fc.tuple(unitText, fc.integer({ min, max })).map(([unit, n]) => unit.repeat(Math.max(1, Math.round(n / unit.length))))
const anyText = (short: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.oneof({ weight: 48, arbitrary: short }, { weight: 12, arbitrary: sized(1_000, 60_000) }, { weight: 1, arbitrary: sized(200_000, 3_000_000) })
const text = anyText(fc.oneof(fc.string({ minLength: 1, maxLength: 300 }), fc.string({ minLength: 1, maxLength: 300, unit: 'grapheme' })))
const output = fc.oneof(
  { weight: 20, arbitrary: fc.string({ maxLength: 400 }) },
  { weight: 7, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => `${'log line\n'.repeat(n / 9)}Traceback: boom`) },
  { weight: 1, arbitrary: sized(50_000, 3_000_000) }
)
const toolCall = fc.record({
  name: fc.constantFrom('bash', 'Edit', 'Read', 'str_replace_editor', 'Write'),
  path: fc.constantFrom('src/a.ts', 'src/b.py', 'lib/c.go', 'README.md', 'test/d.test.ts'),
  payload: anyText(fc.string({ maxLength: 200 })),
  output,
  isError: fc.boolean(),
  blockContent: fc.boolean()
})
const step = fc.record({
  thinking: fc.option(anyText(fc.constant('hmm '.repeat(50)))),
  /** Now and then reasoning the client cannot read: the newest such block is never summarized. */
  redacted: fc.integer({ min: 0, max: 7 }).map((n) => n === 0),
  say: fc.option(text),
  calls: fc.array(toolCall, { minLength: 1, maxLength: 3 })
})
/** Harness context in a prompt (`<system-reminder>` blocks) and a mid-conversation system message after it. */
const reminder = fc.record({ kind: fc.constantFrom('environment', 'rules', 'skills'), body: anyText(fc.string({ minLength: 1, maxLength: 200 })) })
const turn = fc.record({
  prompt: text,
  asBlocks: fc.boolean(),
  reminders: fc.array(reminder, { maxLength: 3 }),
  system: fc.option(fc.record({ text: anyText(fc.string({ minLength: 1, maxLength: 200 })), asBlocks: fc.boolean() }), { freq: 3 }),
  steps: fc.array(step, { maxLength: 5 }),
  answer: text
})
const history = fc.record({
  turns: fc.array(turn, { minLength: 1, maxLength: 12 }),
  prior: fc.option(fc.record({ file: fc.constantFrom('old/x.ts', 'old/y.ts'), ask: text })),
  /** The client compacts mid-turn, right after a tool result (an agent loop does). */
  ending: fc.constantFrom<'answer' | 'pending' | 'tool_result'>('answer', 'pending', 'tool_result')
})

function inputFor(name: string, path: string, payload: string): Record<string, unknown> {
  if (name === 'bash') return { command: `sed -i 's/a/b/' ${path}` }
  if (name === 'str_replace_editor') return { command: 'str_replace', path, old_str: 'a', new_str: payload }
  if (name === 'Write') return { file_path: path, content: payload }
  return { file_path: path }
}

/** The tools of the generated histories that change the file they name, and how each names it. */
const CHANGES: Record<string, (input: Record<string, unknown>) => unknown> = {
  bash: (input) => /^sed -i '[^']*' (\S+)$/.exec(String(input.command))?.[1],
  str_replace_editor: (input) => input.path,
  Write: (input) => input.file_path,
  Edit: (input) => input.file_path
}

/** The files the span's calls changed and were answered without an error: read from the history as the generator wrote it, not by the ledger. */
function filesChanged(span: readonly Message[]): Set<string> {
  const failed = new Set(
    span.flatMap((m) =>
      blocksIn(m)
        .filter((b) => b.type === 'tool_result' && b.is_error === true)
        .map((b) => String(b.tool_use_id))
    )
  )
  const answered = new Set(
    span.flatMap((m) =>
      blocksIn(m)
        .filter((b) => b.type === 'tool_result')
        .map((b) => String(b.tool_use_id))
    )
  )
  const paths = new Set<string>()
  for (const b of span.flatMap(blocksIn)) {
    const path =
      b.type === 'tool_use' && answered.has(String(b.id)) && !failed.has(String(b.id))
        ? CHANGES[String(b.name)]?.(b.input as Record<string, unknown>)
        : undefined
    if (typeof path === 'string') paths.add(path)
  }
  return paths
}

type History = typeof history extends fc.Arbitrary<infer T> ? T : never

function build(h: History): Message[] {
  const messages: Message[] = []
  let id = 0
  h.turns.forEach((t, ti) => {
    const promptBlocks: Block[] = [{ type: 'text', text: t.prompt }]
    if (ti === 0 && h.prior) {
      const s = emptySections()
      s.files_modified = [`${h.prior.file} — changed earlier`]
      s.user_requests = [h.prior.ask]
      promptBlocks.unshift({ type: 'text', text: formatSummary(s, { id: 'cmp_prior', compactedTurns: 2 }) })
    }
    for (const r of t.reminders) promptBlocks.unshift({ type: 'text', text: `<system-reminder>\n${r.kind}\n${r.body}\n</system-reminder>` })
    messages.push({ role: 'user', content: t.asBlocks || t.reminders.length > 0 || (ti === 0 && h.prior) ? promptBlocks : t.prompt })
    if (t.system) {
      const rule = `SYSTEM-RULE ${ti}: ${t.system.text}`
      messages.push({ role: 'system', content: t.system.asBlocks ? [{ type: 'text', text: rule }] : rule })
    }
    for (const s of t.steps) {
      const calls = s.calls.map((c) => ({ ...c, id: `toolu_${id++}` }))
      const content: Block[] = []
      if (s.redacted) content.push({ type: 'redacted_thinking', data: `ENCRYPTED-${id}` })
      if (s.thinking !== null) content.push({ type: 'thinking', thinking: s.thinking, signature: 'sig' })
      if (s.say) content.push({ type: 'text', text: s.say })
      for (const c of calls) content.push({ type: 'tool_use', id: c.id, name: c.name, input: inputFor(c.name, c.path, c.payload) })
      messages.push({ role: 'assistant', content })
      messages.push({
        role: 'user',
        content: calls.map((c) => ({
          type: 'tool_result',
          tool_use_id: c.id,
          content: c.blockContent ? [{ type: 'text', text: c.output }] : c.output,
          ...(c.isError ? { is_error: true } : {})
        }))
      })
    }
    messages.push({ role: 'assistant', content: [{ type: 'text', text: t.answer }] })
  })
  if (h.ending === 'pending') {
    const last = messages.pop()!
    messages.push({ ...last, content: [...(last.content as Block[]), { type: 'tool_use', id: `toolu_${id}`, name: 'bash', input: { command: 'ls' } }] })
  } else if (h.ending === 'tool_result' && messages.length > 2) {
    messages.pop()
  }
  return messages
}

const settings = (mode: 'auto' | 'manual') =>
  fc.record({
    mode: fc.constant(mode),
    budget: fc.integer({ min: 1_000, max: 60_000 }),
    keepShare: fc.constantFrom(0.2, 0.33, 0.5),
    keepTurns: fc.integer({ min: 1, max: 8 }),
    /** A proxy's crossing: keep_tokens aims the cut, the newest step is clipped only to fit the budget. */
    clipToBudget: fc.boolean(),
    /** The provider's count of the prompt, anywhere from a tenth to ten times the estimate (the calibration's bounds and past them). */
    calibration: fc.option(fc.double({ min: 0.05, max: 20, noNaN: true }), { freq: 3 })
  })

const blocksIn = (m: Message): Block[] => (typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content)

/** A kept message as the client sent it: what was put in front of its own blocks taken off. */
function unmerged(sent: Message, original: Message): Message {
  const all = blocksIn(sent)
  const own = all.slice(all.length - blocksIn(original).length)
  return { ...sent, content: typeof original.content === 'string' ? (own[0] as unknown as { text: string }).text : own }
}

/**
 * The tail the client gets back, read from the end of the output: its messages but the first two stand
 * as they were (clips aside); a first user message has the summary turn in front of its blocks, a system
 * message after it may have carried blocks in front of its own, or a system message may stand between them.
 */
function tailOf(out: Message[], input: Message[], keptFrom: number): Message[] {
  const tail = input.slice(keptFrom)
  const rest = out.slice(out.length - (tail.length - 1))
  let i = out.length - tail.length
  const opensWithUser = tail[0]!.role === 'user'
  if (opensWithUser && out[i]?.role === 'system' && tail[1]?.role !== 'system') i -= 1
  const first = opensWithUser ? unmerged(out[i]!, tail[0]!) : out[i]!
  if (opensWithUser && tail[1]?.role === 'system') return [first, unmerged(rest[0]!, tail[1]), ...rest.slice(1)]
  return [first, ...rest]
}

/** A message with every text long enough to clip replaced by a clip marker: the least a tail can shrink to. */
function markersOnly(m: Message): Message {
  const cut = (t: string): string => (t.length > 100 ? '\n[… 1000000 characters clipped by compaction-gateway …]\n' : t)
  const deep = (v: unknown): unknown =>
    typeof v === 'string'
      ? cut(v)
      : Array.isArray(v)
        ? v.map(deep)
        : v && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deep(x)]))
          : v
  if (typeof m.content === 'string') return { ...m, content: cut(m.content) }
  return {
    ...m,
    content: m.content.map((b) => {
      if (b.type === 'text') return { ...b, text: cut(b.text as string) }
      if (b.type === 'thinking') return { ...b, thinking: cut(b.thinking as string) }
      if (b.type === 'tool_use') return { ...b, input: deep(b.input) }
      if (b.type === 'tool_result') return { ...b, content: deep(b.content) }
      return b
    })
  }
}

const MARKER = /\[… \d+ characters clipped by compaction-gateway …\]/

/** The value at a JSON pointer's keys below a message. */
function at(node: unknown, keys: readonly string[]): unknown {
  return keys.reduce<unknown>((n, k) => (n as Record<string, unknown>)[k], node)
}

/** A copy of `node` with the value at `keys` replaced, the rest shared. */
function withValue(node: unknown, keys: readonly string[], value: unknown): unknown {
  if (keys.length === 0) return value
  const [key, ...rest] = keys as [string, ...string[]]
  const copy = (Array.isArray(node) ? [...node] : { ...(node as object) }) as Record<string, unknown>
  copy[key] = withValue(copy[key], rest, value)
  return copy
}

/** The tail equals the input's suffix but for the reported clips, each of which holds the marker and is shorter. */
function sameExceptClips(tail: Message[], suffix: Message[], keptFrom: number, clips: Clip[]): void {
  expect(tail.length).toBe(suffix.length)
  tail.forEach((m, k) => {
    let expected: unknown = suffix[k]
    for (const c of clips.filter((c) => c.message_index === keptFrom + k)) {
      expect(c.path.startsWith(`/messages/${c.message_index}/`)).toBe(true)
      const keys = c.path.split('/').slice(3)
      const clipped = at(m, keys) as string
      const original = at(suffix[k], keys) as string
      expect(original.length).toBe(c.original_chars)
      expect(clipped.length).toBe(c.kept_chars)
      expect(clipped.length).toBeLessThan(original.length)
      expect(clipped).toMatch(MARKER)
      expected = withValue(expected, keys, clipped)
    }
    expect(m).toEqual(expected)
  })
}

/** Where a text of a history sits, as the generator writes it: what the reach of the generator is checked over. */
const KINDS = ['assistant text', 'system text', 'thinking', 'tool input', 'tool output', 'user text'] as const
/** A text this long is one of the megabyte texts real histories hold (the generator's large texts start here). */
const HUGE_CHARS = 200_000

/** The kinds of text of a built history that hold a text of at least HUGE_CHARS. */
function hugeKinds(messages: readonly Message[]): Set<(typeof KINDS)[number]> {
  const kinds = new Set<(typeof KINDS)[number]>()
  const huge = (v: unknown): boolean =>
    typeof v === 'string' ? v.length >= HUGE_CHARS : Array.isArray(v) ? v.some(huge) : v !== null && typeof v === 'object' && Object.values(v).some(huge)
  for (const m of messages) {
    for (const b of blocksIn(m)) {
      if (b.type === 'thinking' && huge(b.thinking)) kinds.add('thinking')
      else if (b.type === 'tool_use' && huge(b.input)) kinds.add('tool input')
      else if (b.type === 'tool_result' && huge(b.content)) kinds.add('tool output')
      else if (b.type === 'text' && huge(b.text)) kinds.add(m.role === 'system' ? 'system text' : m.role === 'user' ? 'user text' : 'assistant text')
    }
  }
  return kinds
}

/**
 * The compaction core's invariants, checked over generated histories and settings of one mode (each mode
 * in a test file of its own, so that the two halves of PROPERTY_RUNS run on two workers at once).
 */
export function checkCompactionInvariants(mode: 'auto' | 'manual'): void {
  const numRuns = Math.ceil(Number(process.env.PROPERTY_RUNS ?? 300) / 2)
  const reached = new Set<string>()
  let histories = 0
  let withHuge = 0
  fc.assert(
    fc.property(history, settings(mode), (h, s) => {
      const input = build(h)
      const kinds = hugeKinds(input)
      for (const kind of kinds) reached.add(kind)
      histories++
      if (kinds.size > 0) withHuge++
      expect(validateHistory(input)).toBeUndefined()
      const keepTokens = Math.floor(s.budget * s.keepShare)
      const usageInputTokens = s.calibration === null ? undefined : Math.max(1, Math.round(promptTokens(input, undefined, undefined) * s.calibration))
      const plan = planCompaction({
        messages: input,
        mode: s.mode,
        budgetTokens: s.budget,
        sizingBudgetTokens: s.budget,
        keepTokens,
        keepTurns: s.keepTurns,
        usageInputTokens,
        dryRun: false,
        clipToBudget: s.clipToBudget
      })
      if (plan.problem) {
        // Refused only when the tail does not fit even with every text in it cut to a marker.
        expect(plan.cut.overBound).toBe(true)
        const least = messageTokens(input.slice(plan.cut.cut).map(markersOnly), plan.scale).reduce((a, b) => a + b, 0)
        expect(least).toBeGreaterThan(plan.tailBound * 0.9)
        return
      }
      if (!plan.summarize) {
        if (s.mode === 'manual') expect(plan.reason).toBe('nothing_to_compact')
        return
      }
      const out = finishCompaction(plan, { id: 'cmp_p' })
      const messages = out.messages!

      // roles alternate, starting with the user; every tool_use is answered (a final pending call aside)
      expect(validateHistory(messages)).toBeUndefined()
      // and the Messages API would take it (its rules written apart from the gateway's)
      expect(messagesApiRefusal({ model: 'm', max_tokens: 1, messages })).toBeUndefined()
      expect(messages[0]!.role).toBe('user')
      // the cut is at a safe boundary
      expect(safeBoundaries(input)).toContain(out.kept_from)
      const opaqueAt = newestOpaque(input)
      // what the client cannot read is never summarized: the newest such block is kept, as it came
      if (opaqueAt >= 0) {
        expect(out.kept_from).toBeLessThanOrEqual(opaqueAt)
        const newest = blocksIn(input[opaqueAt]!)
          .filter((b) => b.type === 'redacted_thinking')
          .at(-1)
        expect(JSON.stringify(messages)).toContain(JSON.stringify(newest))
      }
      // the tail is the input's suffix, except the reported clips
      sameExceptClips(tailOf(messages, input, out.kept_from), input.slice(out.kept_from), out.kept_from, out.clips)
      // the tail stays within keep_tokens, measured afresh; at a proxy's crossing only the newest step may pass
      // it, clipped no further than the budget requires
      const tailTokens = messageTokens(tailOf(messages, input, out.kept_from), plan.scale).reduce((a, b) => a + b, 0)
      // (or the newest step back to the newest block the client cannot read, which is kept)
      if (!s.clipToBudget) expect(tailTokens).toBeLessThanOrEqual(keepTokens)
      else if (tailTokens > keepTokens) expect(safeBoundaries(input).filter((b) => b > out.kept_from && (opaqueAt < 0 || b <= opaqueAt))).toEqual([])
      if (s.clipToBudget && out.clips.length > 0 && usageInputTokens === undefined) expect(out.stats.context_after_compaction).toBeGreaterThan(0.8 * s.budget)
      // the summary stays within its tenth of the budget, or a fifth where the user's words in the span
      // (at most their prompts' text, counted here from the input) would fill more than half of a tenth;
      // the context after compaction within the budget
      if (usageInputTokens === undefined) {
        const promptChars = input
          .slice(0, out.kept_from)
          .filter((m) => m.role === 'user')
          .reduce((n, m) => n + blocksOf(m).reduce((k, b) => k + (b.type === 'text' ? String(b.text).length : 0), 0), 0)
        const share = 2 * (promptChars / 4 + 4 * input.length) > Math.floor(s.budget / 10) ? 5 : 10
        expect(out.stats.summary_tokens).toBeLessThanOrEqual(Math.max(SUMMARY_FLOOR_TOKENS, Math.floor(s.budget / share)))
      }
      expect(out.stats.context_after_compaction).toBeLessThanOrEqual(s.budget)
      const recount = messageTokens(messages, plan.scale).reduce((a, b) => a + b, 0)
      expect(recount).toBe(out.stats.context_after_compaction)
      // nothing lost but what is reported: every file the span touched is in the summary
      for (const path of filesChanged(input.slice(0, out.kept_from))) expect(out.summary!.text).toContain(path)
      if (h.prior && out.kept_from > 0) expect(out.summary!.text).toContain(h.prior.file)
      // the summary's text parses back to exactly its sections (records keep the text alone)
      expect(parseSummary(out.summary!.text)!.sections).toEqual(out.summary!.sections)
      // no summary nests in another
      expect(JSON.stringify(messages).match(/<compaction-summary /g)).toHaveLength(1)
      // the span's system messages are carried, never summarized: the newest whole, unless the bound left it out
      const spanSystem = input.slice(0, out.kept_from).filter((m) => m.role === 'system')
      const sentTexts = new Set(messages.filter((m) => m.role === 'system').flatMap((m) => blocksIn(m).map((b) => b.text as string)))
      const newest = spanSystem.at(-1)
      if (newest && out.stats.carried_context_dropped === 0) for (const b of blocksIn(newest)) expect(sentTexts.has(b.text as string)).toBe(true)
      expect(out.summary!.text).not.toContain('SYSTEM-RULE')
    }),
    { numRuns }
  )
  // The generator reaches what users send: every kind of text reached megabytes in some history, and most
  // histories held such a text (checked at the default runs and more; a handful of runs proves nothing either way).
  if (numRuns >= 100) {
    expect([...reached].sort()).toEqual([...KINDS])
    expect(withHuge / histories).toBeGreaterThan(0.5)
  }
}

/** The generated histories themselves, for the properties of other parts of the core (clearing). */
export const generatedHistories: fc.Arbitrary<Message[]> = history.map(build)
