/**
 * What the agent said it would do, read from its own text: a plan it laid out as a list, and the last
 * sentence that states an intention. The summary's plan and next steps come from these, not from the
 * commands it ran (those are progress) nor from whatever its last message happened to say.
 */
import { sliceHead } from './clip.js'
import { withoutAnsi } from './harness.js'

/** A list item: `1. …`, `2) …`, `- …`, `* …`, `- [ ] …`. */
const ITEM = /^\s{0,3}(?:\d{1,2}[.)]|[-*] \[[ xX]\]|[-*•])\s+(\S.*)$/
/** A sentence that says what the agent will do. */
const INTENTION =
  /\b(?:I'll|I will|I'm going to|I am going to|let me|let's|next,? I|now,? I(?:'ll| will| need| should)|I need to|I should|I want to|the next step|next step is|then I'll|my plan is|I plan to)\b/i
const ANY_ITEM = /^\s{0,3}(?:\d{1,2}[.)]|[-*•])\s/m
const PLAN_WORDS = /\b(?:plan|steps?|approach|to-?do|next|I'll|I will|let me|going to)\b/i
/** A label a harness asks its agent to open its text with (`THOUGHT:`, `Reasoning:`). */
const LEADING_LABEL = /^\s*(?:[A-Z][A-Za-z ]{1,20}):\s*/

/** Items of a list the text lays out as a plan: two or more, in one run, each shortened to a line. */
export function statedPlan(text: string): string[] | undefined {
  if (!ANY_ITEM.test(text) || !PLAN_WORDS.test(text)) return undefined // most texts hold no list at all
  const lines = withoutAnsi(text).split('\n')
  let best: string[] = []
  let run: string[] = []
  let leadIn = ''
  let fenced = false
  // A list is a plan where the line that leads into it speaks of one (a list of findings is not).
  const close = (): void => {
    if (run.length >= 2 && PLAN_WORDS.test(leadIn)) best = run
    run = []
  }
  for (const line of lines) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced
    const m = fenced ? null : ITEM.exec(line)
    if (m) run.push(oneLine(m[1] ?? '', 200))
    else if (line.trim() !== '') {
      close()
      leadIn = line
    }
  }
  close()
  return best.length >= 2 ? best.slice(0, 10) : undefined
}

/** The last sentence of the text that says what the agent will do next, on one line. */
export function lastIntention(text: string): string | undefined {
  if (!INTENTION.test(text)) return undefined // one look before the text is cut into sentences
  const flat = withoutAnsi(text)
    .split('\n')
    .filter((l) => !/^\s*(```|~~~)/.test(l))
    .join(' ')
  const sentences = flat.split(/(?<=[.!?:])\s+/)
  for (let i = sentences.length - 1; i >= 0; i--) {
    const s = (sentences[i] ?? '').replace(LEADING_LABEL, '').trim()
    if (s.length >= 12 && INTENTION.test(s)) return oneLine(s, 400)
  }
  return undefined
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${sliceHead(flat, max - 1)}…` : flat
}
