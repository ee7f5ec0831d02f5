/**
 * The page: sign in with a gateway key; an overview of what compaction did and saved for the key (by time
 * range and session); the key's sessions, see one as a chart of its
 * prompt's size before and after each compaction, read a compaction's summary by section beside what it
 * removed and kept, search the cold layer, delete the session. Plain DOM; every text is set as text.
 */
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import './app.css'
import { LIST_SECTIONS, SECTION_HEADINGS } from '../compaction/sections.js'
import { ApiFailure, api, forgetKey, keepKey, path, storedKey } from './api.js'
import { DROP, describeTimeline, sawtooth } from './sawtooth.js'
import type { TimelinePoint } from '../contract/schemas.js'
import type { Overview, SessionCost } from '../contract/reports.js'
import { describeCost } from './cost.js'
import { describeRange, describeSavings, describeWriters, headline, waitRows, writerParts } from './overview.js'

interface SessionItem {
  session_id: string
  compactions: number
  last_at: string
  raw_history_tokens: number
  context_after_compaction: number
}
interface Stats {
  raw_history_tokens: number
  context_after_compaction: number
  compacted_messages: number
  kept_messages: number
  summary_tokens: number
  compacted_turns: number
}
interface CompactionRecord {
  id: string
  created_at: string
  mode: string
  reason: string
  budget_tokens?: number | null
  crossing?: { because: string; waited_requests: number; limit_tokens: number }
  stats: Stats
  summarizer: { kind: string; model: string | null; fallback_reason: string | null }
  summary: { text: string; sections: Record<string, string | string[]> }
}
interface CompactionDetail {
  compaction: CompactionRecord
  removed: { from: number; to: number; messages: number } | null
  cold_layer: Record<string, number>
}
interface RecallHit {
  kind: string
  text: string
  compaction_id: string
  messages: [number, number]
}

const PAGE = 20

function $<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id)
  if (!el) throw new Error(`the page has no #${id}`)
  return el as T
}

/** An element with its text (never HTML) and attributes. */
function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, attrs: Record<string, string> = {}): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag)
  if (text !== undefined) node.textContent = text
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v)
  return node
}

const fmt = (n: number): string => n.toLocaleString('en-US')
const plural = (n: number, one: string, many = `${one}s`): string => `${fmt(n)} ${n === 1 ? one : many}`
const when = (iso: string): string => new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' })
/** Each listed session's number of compactions: a compaction's number is its place among them, oldest 1. */
const totals = new Map<string, number>()

let key: string | undefined
let sessionsCursor: string | null = null
/** The open session: its compactions' page cursor, how many rows are listed, and each listed compaction's number. */
let current: { id: string; compactionsCursor: string | null; ids: string[]; listed: number; numbers: Map<string, number> } | undefined
let chart: uPlot | undefined
let activityChart: uPlot | undefined
/** The overview asked for last: an answer to an older ask is dropped. */
let overviewAsk = 0

function status(text: string, isError = false): void {
  const s = $('status')
  s.textContent = text
  s.classList.toggle('error', isError)
}

/** Calls the API with this tab's key; a refused key signs the tab out. */
async function call<T>(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<T> {
  try {
    return await api<T>(key ?? '', method, url, body)
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) signOut('The key was refused: sign in again.')
    throw err
  }
}

function showSignedIn(signedIn: boolean): void {
  $('sign-in').hidden = signedIn
  $('app').hidden = !signedIn
  $('sign-out').hidden = !signedIn
}

function signOut(reason = ''): void {
  forgetKey()
  key = undefined
  current = undefined
  chart?.destroy()
  chart = undefined
  activityChart?.destroy()
  activityChart = undefined
  $('session-list').replaceChildren()
  $<HTMLSelectElement>('scope').replaceChildren(el('option', 'Every conversation', { value: '' }))
  $('session-view').hidden = true
  $('overview').hidden = false
  showSignedIn(false)
  $('sign-in-error').textContent = reason
  $<HTMLInputElement>('key').focus()
}

/**
 * Signs in with a key ('' asks without one: a gateway that checks no keys answers, and the page opens with
 * no sign-in step). `quiet`: a refusal shows the form without an error (the keyless try at load).
 */
async function signIn(candidate: string, quiet = false): Promise<void> {
  $('sign-in-error').textContent = ''
  try {
    await api(candidate, 'GET', '/v1/sessions?limit=1')
  } catch (err) {
    if (quiet) return showSignedIn(false)
    $('sign-in-error').textContent =
      err instanceof ApiFailure && err.status === 401 ? 'That key is not one this gateway knows.' : `Cannot sign in: ${(err as Error).message}`
    return
  }
  key = candidate
  if (candidate !== '') keepKey(candidate)
  $<HTMLInputElement>('key').value = ''
  showSignedIn(true)
  // nothing to sign out of where the gateway takes no keys
  $('sign-out').hidden = candidate === ''
  await Promise.all([loadSessions(true), showOverview()])
}

async function loadSessions(fresh: boolean): Promise<void> {
  const list = $('session-list')
  if (fresh) {
    list.replaceChildren()
    sessionsCursor = null
  }
  const query = new URLSearchParams({ limit: String(PAGE) })
  if (!fresh && sessionsCursor) query.set('cursor', sessionsCursor)
  try {
    const page = await call<{ sessions: SessionItem[]; next_cursor: string | null }>('GET', `/v1/sessions?${query.toString()}`)
    const scope = $<HTMLSelectElement>('scope')
    for (const s of page.sessions) {
      list.append(sessionItem(s))
      scope.append(el('option', s.session_id, { value: s.session_id }))
    }
    sessionsCursor = page.next_cursor
    $('more-sessions').hidden = page.next_cursor === null
    $('no-sessions').hidden = list.childElementCount > 0
  } catch (err) {
    status(`The sessions cannot be listed: ${(err as Error).message}`, true)
  }
}

function sessionItem(s: SessionItem): HTMLLIElement {
  totals.set(s.session_id, s.compactions)
  const item = el('li')
  item.dataset.session = s.session_id
  const button = el('button', undefined, { type: 'button', class: 'session' })
  button.append(
    el('span', s.session_id, { class: 'name' }),
    el('span', `${plural(s.compactions, 'compaction')} · ${when(s.last_at)}`, { class: 'meta' }),
    el('span', `${fmt(s.raw_history_tokens)} → ${fmt(s.context_after_compaction)} tokens`, { class: 'meta' })
  )
  button.addEventListener('click', () => void openSession(s.session_id))
  item.append(button)
  return item
}

/** Marks the view shown in the list: the overview, or a session. */
function markCurrent(id: string | undefined): void {
  $('show-overview').setAttribute('aria-current', String(id === undefined))
  for (const b of document.querySelectorAll<HTMLButtonElement>('#session-list button'))
    b.setAttribute('aria-current', String(b.closest('li')?.dataset.session === id))
}

/** The overview: the page's first view, for the range and the conversations the filters choose. */
async function showOverview(focus = false): Promise<void> {
  current = undefined
  chart?.destroy()
  chart = undefined
  markCurrent(undefined)
  $('session-view').hidden = true
  $('overview').hidden = false
  if (focus) $('overview-title').focus()
  const hours = Number($<HTMLSelectElement>('range').value)
  const session = $<HTMLSelectElement>('scope').value
  const query = new URLSearchParams({ from: new Date(Date.now() - hours * 3_600_000).toISOString() })
  if (session !== '') query.set('session_id', session)
  const ask = ++overviewAsk
  try {
    const o = await call<Overview>('GET', `/v1/overview?${query.toString()}`)
    if (ask !== overviewAsk) return
    drawOverview(o)
    status('')
  } catch (err) {
    if (ask === overviewAsk) status(`The overview cannot be read: ${(err as Error).message}`, true)
  }
}

function drawOverview(o: Overview): void {
  $('overview-range').textContent = describeRange(o)
  $('cards').replaceChildren(
    ...headline(o).map((c) => {
      const card = el('div')
      const value = el('dd')
      value.append(el('span', c.value, { class: 'value' }), el('span', c.note, { class: 'note' }))
      card.append(el('dt', c.label), value)
      return card
    })
  )
  drawActivity(o)
  const total = o.compactions.total
  const share = $('writers')
  share.replaceChildren(
    ...writerParts(o).map((p) => {
      const part = el('span', undefined, { class: p.key, title: `${p.label}: ${p.count.toLocaleString('en-US')}` })
      part.style.flexGrow = String(p.count / Math.max(1, total))
      return part
    })
  )
  const legend = el('ul', undefined, { class: 'legend' })
  for (const p of writerParts(o)) {
    const item = el('li')
    item.append(
      el('span', undefined, { class: `swatch ${p.key}`, 'aria-hidden': 'true' }),
      document.createTextNode(`${p.label}: ${p.count.toLocaleString('en-US')}`)
    )
    legend.append(item)
  }
  $('writers-caption').replaceChildren(document.createTextNode(describeWriters(o)), legend)
  $('waits').replaceChildren(
    ...waitRows(o).map((w) => {
      const row = el('tr')
      row.append(el('td', w.bucket), el('td', w.count.toLocaleString('en-US')))
      return row
    })
  )
  $('savings').textContent = describeSavings(o)
}

/** Compactions a step (bars) and the tokens kept out of prompts a step (a line), over the range. */
function drawActivity(o: Overview): void {
  const host = $('activity-chart')
  activityChart?.destroy()
  const width = Math.max(300, host.clientWidth || 640)
  // each bar in the middle of its step, the axis from the range's start to the end of its last step
  const stepS = o.bucket === 'hour' ? 3_600 : 86_400
  const x = o.series.map((p) => Date.parse(p.at) / 1_000 + stepS / 2)
  const startS = Date.parse(o.from) / 1_000
  const endS = startS + o.series.length * stepS
  const bars = uPlot.paths.bars?.({ size: [0.7, 48] })
  const step = o.bucket === 'hour' ? 'hour' : 'day'
  const opts: uPlot.Options = {
    width,
    height: 240,
    scales: {
      x: { time: true, range: () => [startS, endS] },
      n: { range: (_u, _min, max) => [0, Math.max(1, max)] },
      t: { range: (_u, _min, max) => [0, Math.max(1, max)] }
    },
    axes: [
      {},
      { scale: 'n', label: `compactions per ${step}`, size: 56, values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? String(t) : '')) },
      {
        scale: 't',
        side: 1,
        label: 'tokens kept out',
        size: 64,
        grid: { show: false },
        values: (_u, ticks) => ticks.map((t) => (t >= 1000 ? `${Math.round(t / 1000)}k` : String(t)))
      }
    ],
    series: [
      {
        label: step === 'hour' ? 'hour from' : 'day from',
        value: (_u, v) =>
          v === null || v === undefined ? '' : new Date((v - stepS / 2) * 1_000).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })
      },
      {
        label: 'compactions',
        scale: 'n',
        fill: '#93c5fd',
        stroke: '#1d4ed8',
        ...(bars ? { paths: bars } : {}),
        points: { show: false },
        value: (_u, v) => (v === null || v === undefined ? '' : String(v))
      },
      {
        label: 'tokens kept out',
        scale: 't',
        stroke: '#16a34a',
        width: 2,
        points: { show: false },
        value: (_u, v) => (v === null || v === undefined ? '' : `${Math.round(v).toLocaleString('en-US')} tokens`)
      }
    ],
    legend: { show: true }
  }
  activityChart = new uPlot(opts, [x, o.series.map((p) => p.compactions), o.series.map((p) => p.tokens_kept_out)], host)
  host.setAttribute('role', 'img')
  host.setAttribute('aria-describedby', 'activity-caption')
  const busiest = o.series.reduce((best, p) => (p.compactions > best.compactions ? p : best), o.series[0] ?? { at: o.from, compactions: 0 })
  $('activity-caption').textContent =
    o.compactions.total === 0
      ? `No compactions in this range (a bar per ${step}).`
      : `Compactions per ${step} (bars) and tokens kept out of prompts per ${step} (line); the most, ${busiest.compactions.toLocaleString('en-US')}, in the ${step} from ${new Date(busiest.at).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}.`
}

async function openSession(id: string): Promise<void> {
  markCurrent(id)
  current = { id, compactionsCursor: null, ids: [], listed: 0, numbers: new Map() }
  status(`Loading ${id}…`)
  $('overview').hidden = true
  $('session-view').hidden = false
  $('detail').hidden = true
  $('hits').replaceChildren()
  $('compactions').replaceChildren()
  $('session-title').textContent = id
  $('session-title').focus()
  try {
    $('session-cost').textContent = ''
    const [timeline, cost] = await Promise.all([
      call<{ points: TimelinePoint[]; complete: boolean }>('GET', path`/v1/sessions/${id}/timeline`),
      call<SessionCost>('GET', path`/v1/sessions/${id}/cost`),
      loadCompactions(true)
    ])
    if (current?.id !== id) return
    const first = Math.max(1, (totals.get(id) ?? timeline.points.length) - timeline.points.length + 1)
    drawChart(timeline.points, first)
    $('chart-caption').textContent = describeTimeline(timeline.points, timeline.complete)
    $('session-cost').textContent = describeCost(cost)
    status('')
  } catch (err) {
    status(`The session cannot be read: ${(err as Error).message}`, true)
  }
}

function drawChart(points: TimelinePoint[], first: number): void {
  const data = sawtooth(points, first)
  const host = $('chart')
  chart?.destroy()
  const width = Math.max(320, host.clientWidth || 640)
  const opts: uPlot.Options = {
    width,
    height: 260,
    scales: { x: { time: false } },
    axes: [
      { label: 'compaction', values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? String(t) : '')) },
      { label: 'prompt tokens', size: 64, values: (_u, ticks) => ticks.map((t) => (t >= 1000 ? `${Math.round(t / 1000)}k` : String(t))) }
    ],
    // the hover reads "compaction #12", "prompt 41,230 tokens" (before it on its line, after it just right of it)
    series: [
      { label: 'compaction', value: (_u, v) => (v === null || v === undefined ? '' : `#${Math.floor(v + DROP / 2)}${v % 1 > DROP / 2 ? ' (after)' : ''}`) },
      { label: 'prompt', stroke: '#1d4ed8', width: 2, points: { show: false }, value: (_u, v) => (v === null || v === undefined ? '' : `${fmt(v)} tokens`) },
      {
        label: 'budget',
        stroke: '#b91c1c',
        width: 1.5,
        dash: [6, 4],
        points: { show: false },
        value: (_u, v) => (v === null || v === undefined ? '' : `${fmt(v)} tokens`)
      }
    ],
    legend: { show: true },
    cursor: { drag: { x: true, y: false } }
  }
  chart = new uPlot(opts, [data.x, data.prompt, data.budget], host)
  host.setAttribute('role', 'img')
  host.setAttribute('aria-describedby', 'chart-caption')
  // a click on the chart opens the compaction under the cursor
  chart.over.addEventListener('click', () => {
    const i = chart?.cursor.idx
    const id = i === undefined || i === null ? undefined : data.ids[i]
    if (id) void openCompaction(id)
  })
}

async function loadCompactions(fresh: boolean): Promise<void> {
  if (!current) return
  const session = current
  const query = new URLSearchParams({ limit: String(PAGE) })
  if (!fresh && session.compactionsCursor) query.set('cursor', session.compactionsCursor)
  if (fresh) session.listed = 0
  const page = await call<{ compactions: CompactionRecord[]; next_cursor: string | null }>(
    'GET',
    `${path`/v1/sessions/${session.id}/compactions`}?${query.toString()}`
  )
  if (current !== session) return
  const body = $('compactions')
  const total = totals.get(session.id)
  for (const c of page.compactions) {
    // numbered as on the chart: the session's first compaction is #1
    const number = total === undefined ? undefined : total - session.listed
    session.listed++
    if (number !== undefined) session.numbers.set(c.id, number)
    const row = el('tr')
    const open = el('button', `${number === undefined ? '' : `#${fmt(number)} · `}${when(c.created_at)}`, { type: 'button', class: 'link' })
    open.addEventListener('click', () => void openCompaction(c.id))
    const first = el('td')
    first.append(open)
    row.append(first, el('td', `${fmt(c.stats.raw_history_tokens)} → ${fmt(c.stats.context_after_compaction)}`), el('td', writer(c.summarizer)))
    body.append(row)
  }
  session.compactionsCursor = page.next_cursor
  $('more-compactions').hidden = page.next_cursor === null
}

async function openCompaction(compactionId: string): Promise<void> {
  if (!current) return
  const session = current.id
  try {
    const detail = await call<CompactionDetail>('GET', path`/v1/sessions/${session}/compactions/${compactionId}`)
    if (current?.id !== session) return
    showDetail(detail)
  } catch (err) {
    status(`The compaction cannot be read: ${(err as Error).message}`, true)
  }
}

/** Who wrote a summary: the model, or the extractive summary chosen or fallen back to (and why). */
function writer(w: CompactionRecord['summarizer']): string {
  return `${w.model ?? w.kind}${w.fallback_reason ? ` (fallback: ${w.fallback_reason})` : w.kind === 'extractive' ? ' (chosen)' : ''}`
}

/** The removed messages' entries, a page at a time, each folded to its first line until opened. */
async function loadEntries(compactionId: string, fresh: boolean, cursor?: string): Promise<void> {
  if (!current) return
  const session = current.id
  const list = document.getElementById('removed')
  if (!list) return
  if (fresh) list.replaceChildren()
  try {
    const query = new URLSearchParams({ limit: '100', ...(cursor ? { cursor } : {}) })
    const page = await call<{ entries: { kind: string; text: string; messages: [number, number] }[]; next_cursor: string | null }>(
      'GET',
      `${path`/v1/sessions/${session}/compactions/${compactionId}/entries`}?${query.toString()}`
    )
    if (current?.id !== session) return
    document.getElementById('more-removed')?.remove()
    if (fresh && page.entries.length === 0) list.append(el('li', 'No cold layer was kept for it (a compaction without a session keeps none).'))
    for (const e of page.entries) {
      const item = el('li')
      const fold = el('details')
      const where = e.messages[0] === e.messages[1] ? `message ${e.messages[0]}` : `messages ${e.messages[0]}–${e.messages[1]}`
      const head = (e.text.split('\n')[0] ?? '').slice(0, 140)
      fold.append(el('summary', `${where} · ${e.kind} · ${head}${head.length < e.text.length ? '…' : ''}`), el('pre', e.text))
      item.append(fold)
      list.append(item)
    }
    if (page.next_cursor) {
      const more = el('button', 'More of what it removed', { type: 'button', id: 'more-removed' })
      const next = page.next_cursor
      more.addEventListener('click', () => void loadEntries(compactionId, false, next))
      list.after(more)
    }
  } catch (err) {
    status(`What the compaction removed cannot be read: ${(err as Error).message}`, true)
  }
}

/** Why a crossing under a limit was made when it was (COMPACT_LIMIT), in words. */
function crossingText(c: NonNullable<CompactionRecord['crossing']>): string {
  const why: Record<string, string> = {
    pays_back: 'it pays back: the conversation is expected to run long enough for the cache reads it saves to cover the rewrite',
    reaches_limit: `the conversation was expected to reach the limit of ${fmt(c.limit_tokens)} tokens first`,
    cache_cold: 'its requests come further apart than the prompt cache lives, so the rewrite cost nothing more',
    over_limit: `the prompt passed the limit of ${fmt(c.limit_tokens)} tokens`
  }
  const waited = c.waited_requests > 0 ? `after ${plural(c.waited_requests, 'request')} over the budget that would not have paid back; ` : ''
  return `made ${waited}${why[c.because] ?? c.because}`
}

function showDetail({ compaction: c, removed, cold_layer: cold }: CompactionDetail): void {
  $('detail').hidden = false
  $('detail-title').textContent = `Compaction ${c.id}`
  const figures: [string, string][] = [
    ['When', when(c.created_at)],
    ['Prompt', `${fmt(c.stats.raw_history_tokens)} → ${fmt(c.stats.context_after_compaction)} tokens`],
    ['Budget', c.budget_tokens === undefined ? 'not recorded' : c.budget_tokens === null ? 'off' : `${fmt(c.budget_tokens)} tokens`],
    ...(c.crossing ? [['Crossing', crossingText(c.crossing)] as [string, string]] : []),
    ['Summary', `${fmt(c.stats.summary_tokens)} tokens for ${plural(c.stats.compacted_turns, 'turn')}`],
    ['Number', current?.numbers.has(c.id) ? `#${fmt(current.numbers.get(c.id) ?? 0)} of ${fmt(totals.get(current.id) ?? 0)}` : 'not listed yet'],
    ['Written by', writer(c.summarizer)],
    [
      'Cold layer',
      Object.keys(cold).length === 0
        ? 'none'
        : Object.entries(cold)
            .map(([kind, n]) => `${n} ${kind}`)
            .join(', ')
    ]
  ]
  $('figures').replaceChildren(...figures.flatMap(([k, v]) => [el('dt', k), el('dd', v)]))

  const ranges = $('ranges')
  ranges.replaceChildren()
  if (removed) {
    const kept = c.stats.kept_messages
    const total = removed.messages + kept
    const bar = el('div', undefined, { class: 'bar-ranges' })
    const gone = el('div', `messages ${removed.from}–${removed.to}`, { class: 'removed' })
    const raw = el('div', kept > 0 ? `${removed.to + 1}–${removed.to + kept}` : '', { class: 'kept' })
    gone.style.flexGrow = String(removed.messages / total)
    raw.style.flexGrow = String(Math.max(kept / total, 0.001))
    bar.append(gone, raw)
    ranges.append(
      bar,
      el(
        'p',
        `Removed: ${plural(removed.messages, 'message')} (${removed.from}–${removed.to}), replaced by the summary below. Kept raw: ${plural(kept, 'message')}${kept > 0 ? ` (${removed.to + 1}–${removed.to + kept})` : ''}.`
      ),
      el('h4', 'What it removed'),
      el(
        'p',
        'As the cold layer keeps it (redacted, each passage with the messages it came from); open one to read it whole. The messages kept raw went on to the model as the client sent them: the gateway keeps no copy of them.',
        { class: 'hint' }
      ),
      el('ol', undefined, { id: 'removed', 'aria-label': 'What the compaction removed' })
    )
    void loadEntries(c.id, true)
  } else {
    ranges.append(el('p', 'Nothing was removed.'))
  }

  const sections = $('sections')
  sections.replaceChildren()
  const objective = c.summary.sections.objective
  if (typeof objective === 'string' && objective !== '') sections.append(el('h4', SECTION_HEADINGS.objective), el('p', objective))
  for (const name of LIST_SECTIONS) {
    const items = c.summary.sections[name]
    if (!Array.isArray(items) || items.length === 0) continue
    const list = el('ul')
    for (const item of items) list.append(el('li', item))
    sections.append(el('h4', SECTION_HEADINGS[name]), list)
  }
  if (sections.childElementCount === 0) sections.append(el('pre', c.summary.text))
  $('detail-title').focus()
}

async function search(query: string): Promise<void> {
  if (!current) return
  const hits = $('hits')
  hits.replaceChildren()
  try {
    const found = await call<{ results: RecallHit[] }>('POST', path`/v1/sessions/${current.id}/recall`, { query, limit: 20 })
    if (found.results.length === 0) hits.append(el('li', `Nothing removed from this session matches “${query}”.`))
    for (const hit of found.results) {
      const item = el('li')
      const cite = el('button', `${hit.kind} · compaction ${hit.compaction_id}, messages ${hit.messages[0]}–${hit.messages[1]}`, {
        type: 'button',
        class: 'link cite'
      })
      cite.addEventListener('click', () => void openCompaction(hit.compaction_id))
      item.append(cite, el('blockquote', hit.text))
      hits.append(item)
    }
    status(`${found.results.length} result${found.results.length === 1 ? '' : 's'} for “${query}”.`)
  } catch (err) {
    status(`The search failed: ${(err as Error).message}`, true)
  }
}

function askToDelete(): void {
  if (!current) return
  const dialog = $<HTMLDialogElement>('confirm')
  $('confirm-text').textContent = `Session “${current.id}”: its compactions, summaries, cold layer and cached summaries are deleted from the gateway, for good.`
  dialog.returnValue = ''
  dialog.showModal()
}

async function deleteCurrent(): Promise<void> {
  if (!current) return
  const id = current.id
  try {
    const result = await call<{ deleted: { compactions: number; cold_layer: number; cached: number } }>('DELETE', path`/v1/sessions/${id}`)
    document.querySelector(`#session-list li[data-session="${CSS.escape(id)}"]`)?.remove()
    $('scope')
      .querySelector(`option[value="${CSS.escape(id)}"]`)
      ?.remove()
    $('no-sessions').hidden = $('session-list').childElementCount > 0
    await showOverview()
    const d = result.deleted
    status(
      `Deleted ${id}: ${plural(d.compactions, 'compaction')}, ${plural(d.cold_layer, 'cold-layer entry', 'cold-layer entries')}, ${plural(d.cached, 'cached summary', 'cached summaries')}.`
    )
  } catch (err) {
    status(`The session was not deleted: ${(err as Error).message}`, true)
  }
}

function wire(): void {
  $('sign-in-form').addEventListener('submit', (e) => {
    e.preventDefault()
    void signIn($<HTMLInputElement>('key').value.trim())
  })
  $('sign-out').addEventListener('click', () => signOut())
  $('show-overview').addEventListener('click', () => void showOverview(true))
  $('range').addEventListener('change', () => void showOverview())
  $('scope').addEventListener('change', () => void showOverview())
  $('more-sessions').addEventListener('click', () => void loadSessions(false))
  $('more-compactions').addEventListener('click', () => void loadCompactions(false).catch((err: Error) => status(err.message, true)))
  $('search').addEventListener('submit', (e) => {
    e.preventDefault()
    const query = $<HTMLInputElement>('query').value.trim()
    if (query) void search(query)
  })
  $('delete').addEventListener('click', askToDelete)
  $('confirm').addEventListener('close', () => {
    if ($<HTMLDialogElement>('confirm').returnValue === 'delete') void deleteCurrent()
  })
  new ResizeObserver(() => {
    const host = $('chart')
    if (chart && host.clientWidth > 0) chart.setSize({ width: host.clientWidth, height: 260 })
  }).observe($('chart'))
  new ResizeObserver(() => {
    const host = $('activity-chart')
    if (activityChart && host.clientWidth > 0) activityChart.setSize({ width: host.clientWidth, height: 240 })
  }).observe($('activity-chart'))

  const kept = storedKey()
  void signIn(kept ?? '', kept === undefined)
}

wire()
