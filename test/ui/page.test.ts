import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, type Page, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { ROOT, type ServerProcess, startServer, tempDb } from '../helpers/process.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'

/**
 * The sessions page in a real browser (Debian's chromium, driven by playwright-core) against a real
 * gateway process: sign in, list, open a session of 1,000 compactions, see its chart and a summary,
 * search, delete; the key never in a URL the page asks for, nor in the gateway's log.
 */
const CHROMIUM = process.env.COMPACT_TEST_CHROMIUM ?? '/usr/bin/chromium'
const missing = existsSync(CHROMIUM) ? undefined : `no browser at ${CHROMIUM} (apt-get install chromium; .ci/run does)`
if (missing) console.warn(`skipped: ${missing}`)

const ALICE = 'key-alice-ui-000000000001'
const BOB = 'key-bob-ui-0000000000002'
const CAROL = 'key-carol-ui-00000000003'
const COMPACTIONS = 1_000
const SHOTS = join(ROOT, 'test-results', 'ui')

/** A history whose old turns grow with `n` (so that the sawtooth's teeth differ) and hold a findable word. */
function history(n: number): Message[] {
  const messages: Message[] = [user(`Make the flaky importer test pass (round ${n})`)]
  for (let i = 0; i < 2 + (n % 7); i++)
    messages.push(
      ...shellStep(`toolu_${n}_${i}`, `npm test -- importer ${i}`, `FAIL test/importer.test.ts > parses quokka rows\n${'x'.repeat(200 * (1 + (n % 5)))}`, true)
    )
  messages.push(assistant('Found the race in the fixture loader.'), user('Fix it'))
  return messages
}

/** A proxied conversation after `n` steps: it grows by a step a request. */
function grown(n: number): Message[] {
  const messages: Message[] = [user('Make the flaky importer test pass')]
  for (let i = 0; i < n; i++)
    messages.push(
      ...shellStep(`toolu_p_${i}`, `npm test -- importer ${i}`, `FAIL test/importer.test.ts > parses quokka rows ${i}\n${'y'.repeat(1_500)}`, true),
      assistant(`Looked at run ${i}.`),
      user('Go on')
    )
  return messages
}

async function seed(server: ServerProcess): Promise<void> {
  const post = async (key: string, session: string, n: number): Promise<void> => {
    const res = await fetch(`${server.url}/v1/compact`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ messages: history(n), mode: 'manual', session_id: session, budget_tokens: 8_000 })
    })
    if (res.status !== 200) throw new Error(`seeding failed: ${res.status} ${await res.text()}`)
  }
  for (let i = 0; i < COMPACTIONS; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => post(ALICE, 'long-session', i + j)))
  await post(ALICE, 'short-session', 1)
  await post(BOB, 'bobs-session', 2)
  // a conversation through the Messages API proxy, past its budget: its cost is the upstream's own usage
  let compacted = 0
  for (let n = 1; compacted < 2 && n < 40; n++) {
    const res = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': CAROL,
        'x-compaction-session': 'proxied-session',
        'x-compaction-budget': '3000',
        'anthropic-version': '2023-06-01'
      },
      body: JSON.stringify({ model: 'claude-ui', max_tokens: 16, messages: grown(n) })
    })
    if (res.status !== 200) throw new Error(`seeding the proxy failed: ${res.status} ${await res.text()}`)
    await res.arrayBuffer()
    if (res.headers.get('x-compaction') === 'compacted') compacted++
  }
}

describe.skipIf(missing !== undefined)(`the sessions page in chromium${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let server: ServerProcess
  let browser: Browser
  let upstream: FakeAnthropic
  beforeAll(async () => {
    upstream = await new FakeAnthropic().start()
    upstream.fallback = { text: 'ok' }
    server = await startServer({
      COMPACT_DB: tempDb(),
      COMPACT_API_KEYS: `alice=${ALICE},bob=${BOB},carol=${CAROL}`,
      COMPACT_RATE_LIMIT_PER_MIN: '100000',
      // the proxy's upstream, with the gateway's key; summaries stay extractive
      ANTHROPIC_API_KEY: 'sk-ant-ui-upstream-0000000000000',
      ANTHROPIC_BASE_URL: upstream.url,
      COMPACT_SUMMARIZER: 'extractive'
    })
    await seed(server)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync'
      ]
    })
    mkdirSync(SHOTS, { recursive: true })
  }, 120_000)
  afterAll(async () => {
    await upstream?.close()
    await browser?.close()
    server?.child.kill('SIGTERM')
    await server?.exited
  })

  /** A fresh tab that records every URL it asks for. */
  async function tab(): Promise<{ page: Page; urls: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 } })
    const page = await context.newPage()
    const urls: string[] = []
    page.on('request', (r) => void urls.push(r.url()))
    return { page, urls }
  }

  it('signs in, lists, charts a session of 1,000 compactions, shows a summary by section, searches, deletes', async () => {
    const { page, urls } = await tab()
    await page.goto(`${server.url}/ui/`)
    // a wrong key is refused, in words
    await page.getByLabel('Gateway key').fill('key-wrong-000000000000')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not one this gateway knows')

    await page.getByLabel('Gateway key').fill(ALICE)
    await page.keyboard.press('Enter') // the form is usable from the keyboard
    const sessions = page.getByRole('navigation', { name: 'Sessions' })
    await sessions.getByRole('button', { name: /long-session/ }).waitFor()
    expect(await sessions.getByRole('listitem').allTextContents()).toEqual([expect.stringContaining('short-session'), expect.stringContaining('long-session')])
    expect(await sessions.textContent()).not.toContain('bobs-session')
    expect(await page.evaluate("sessionStorage.getItem('compaction-gateway.key')")).toBe(ALICE)

    const opened = Date.now()
    await sessions.getByRole('button', { name: /long-session/ }).click()
    await expect
      .poll(() => page.locator('#chart-caption').textContent(), { timeout: 20_000 })
      .toMatch(/^1,000 compactions: the prompt reached [\d,]+–[\d,]+ tokens before each and [\d,]+–[\d,]+ after\. Budget 8,000 tokens\.$/)
    console.info(`a session of ${COMPACTIONS} compactions: its chart and first page drawn ${Date.now() - opened} ms after the click`)
    expect(await page.locator('#chart canvas').count()).toBe(1)
    expect(await page.locator('#compactions tr').count()).toBe(20)

    // a compaction: its summary by section, the removed range beside what was kept
    await page.locator('#compactions tr').first().getByRole('button').click()
    const detail = page.getByRole('article')
    await detail.getByRole('heading', { name: /^Compaction cmp_/ }).waitFor()
    expect(await detail.getByRole('heading', { level: 4 }).allTextContents()).toContain('Failing tests and errors')
    expect(await page.locator('#ranges').textContent()).toMatch(/Removed: \d+ messages \(0–\d+\), replaced by the summary below\. Kept raw: \d+ messages?/)
    expect(await page.locator('#sections').textContent()).toContain('test/importer.test.ts')
    // numbered as on the chart (the newest of 1,000 is #1,000), at a time to the second
    expect(await page.locator('#compactions tr').first().getByRole('button').textContent()).toMatch(/^#1,000 · .*\d:\d\d:\d\d/)
    expect(await page.locator('#figures').textContent()).toContain('#1,000 of 1,000')
    // what it removed, each passage folded to its first line, opened to its whole text
    const removed = page.getByRole('list', { name: 'What the compaction removed' })
    await removed.getByRole('listitem').first().waitFor()
    const first = removed.locator('details').first()
    expect(await first.locator('summary').textContent()).toMatch(/^messages? \d+(?:–\d+)? · \w+ · /)
    expect(await first.locator('pre').isVisible()).toBe(false)
    await first.locator('summary').click()
    expect(await first.locator('pre').isVisible()).toBe(true)

    // the cold layer, searched from the box, with citations that open their compaction
    await page.getByLabel('Search what compaction removed').fill('quokka')
    await page.getByRole('button', { name: 'Search' }).click()
    const hits = page.getByRole('list', { name: 'Search results' })
    await hits.getByRole('button').first().waitFor()
    expect(await hits.getByRole('button').first().textContent()).toMatch(/ · compaction cmp_\S+, messages \d+–\d+$/)
    expect(await hits.locator('blockquote').first().textContent()).toContain('quokka')
    await hits.getByRole('button').first().click()
    await detail.getByRole('heading', { name: /^Compaction cmp_/ }).waitFor()
    await page.screenshot({ path: join(SHOTS, 'session.png'), fullPage: true })

    // deletion, after a confirmation
    await page.getByRole('button', { name: 'Delete session…' }).click()
    const dialog = page.getByRole('dialog', { name: 'Delete this session?' })
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    expect(await sessions.getByRole('button', { name: /long-session/ }).count()).toBe(1)
    await page.getByRole('button', { name: 'Delete session…' }).click()
    await dialog.getByRole('button', { name: 'Delete' }).click()
    await expect
      .poll(() => page.getByRole('status').textContent(), { timeout: 30_000 })
      .toMatch(/^Deleted long-session: 1,000 compactions, [\d,]+ cold-layer entries/)
    expect(await sessions.getByRole('button', { name: /long-session/ }).count()).toBe(0)
    const listed = (await (await fetch(`${server.url}/v1/sessions`, { headers: { 'x-api-key': ALICE } })).json()) as { sessions: { session_id: string }[] }
    expect(listed.sessions.map((s) => s.session_id)).toEqual(['short-session'])

    // everything came from the gateway, and the key was in no URL nor in the gateway's log
    expect(urls.length).toBeGreaterThan(5)
    for (const url of urls) expect(url.startsWith(`${server.url}/`)).toBe(true)
    for (const url of urls) expect(url).not.toContain(ALICE)
    expect(server.stdout() + server.stderr()).not.toContain(ALICE)
  }, 120_000)

  it("shows another key only its own sessions; signing out forgets the key; the page works on a laptop's narrow window", async () => {
    const { page } = await tab()
    await page.setViewportSize({ width: 1024, height: 700 })
    await page.goto(`${server.url}/ui/`)
    await page.getByLabel('Gateway key').fill(BOB)
    await page.getByRole('button', { name: 'Sign in' }).click()
    const sessions = page.getByRole('navigation', { name: 'Sessions' })
    await sessions.getByRole('button', { name: /bobs-session/ }).waitFor()
    // by keyboard alone: Tab to the session, Enter to open it
    let focused = ''
    for (let i = 0; i < 10 && !focused.includes('bobs-session'); i++) {
      await page.keyboard.press('Tab')
      focused = String(await page.evaluate('document.activeElement?.textContent ?? ""'))
    }
    expect(focused).toContain('bobs-session')
    await page.keyboard.press('Enter')
    await expect.poll(() => page.locator('#chart-caption').textContent()).toMatch(/^1 compaction:/)
    expect(await sessions.getByRole('listitem').count()).toBe(1)
    // nothing wider than the window
    expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true)
    await page.screenshot({ path: join(SHOTS, 'narrow.png') })
    await page.getByRole('button', { name: 'Sign out' }).click()
    expect(await page.evaluate("sessionStorage.getItem('compaction-gateway.key')")).toBeNull()
    await page.getByLabel('Gateway key').waitFor()
  }, 60_000)

  it("fits a phone's width (390 pixels) in every view, signed out and signed in: only the sign-in form while signed out", async () => {
    const { page } = await tab()
    await page.setViewportSize({ width: 390, height: 844 })
    const fits = async (): Promise<boolean> => (await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')) as boolean
    await page.goto(`${server.url}/ui/`)
    await page.getByLabel('Gateway key').waitFor()
    // signed out: the sessions app is not shown under the form
    expect(await page.locator('#app').isVisible()).toBe(false)
    expect(await fits()).toBe(true)
    await page.getByLabel('Gateway key').fill(ALICE)
    await page.getByRole('button', { name: 'Sign in' }).click()
    // the overview, the first view
    await expect.poll(() => page.locator('#activity-chart canvas').count(), { timeout: 20_000 }).toBe(1)
    expect(await fits()).toBe(true)
    await page.screenshot({ path: join(SHOTS, 'phone-overview.png'), fullPage: true })
    const sessions = page.getByRole('navigation', { name: 'Sessions' })
    await sessions.getByRole('button', { name: /short-session/ }).click()
    await expect.poll(() => page.locator('#chart-caption').textContent(), { timeout: 20_000 }).toMatch(/compaction/)
    expect(await fits()).toBe(true)
    // a compaction opened: its id wraps, and the buttons and the table stay within the window
    await page.locator('#compactions tr').first().getByRole('button').click()
    await page
      .getByRole('article')
      .getByRole('heading', { name: /^Compaction cmp_/ })
      .waitFor()
    expect(await fits()).toBe(true)
    for (const name of ['Delete session…', 'Search']) {
      const box = await page.getByRole('button', { name }).boundingBox()
      expect(box && box.x >= 0 && box.x + box.width <= 390, name).toBe(true)
    }
    await page.screenshot({ path: join(SHOTS, 'phone.png'), fullPage: true })
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('Gateway key').waitFor()
    expect(await page.locator('#app').isVisible()).toBe(false)
  }, 60_000)

  it("says what a proxied session cost, from the upstream's own usage, and what compaction saved", async () => {
    const { page } = await tab()
    await page.goto(`${server.url}/ui/`)
    await page.getByLabel('Gateway key').fill(CAROL)
    await page.getByRole('button', { name: 'Sign in' }).click()
    const sessions = page.getByRole('navigation', { name: 'Sessions' })
    await sessions.getByRole('button', { name: /proxied-session/ }).click()
    await expect
      .poll(() => page.locator('#session-cost').textContent(), { timeout: 20_000 })
      .toMatch(
        /^Through the proxy: [\d,]+ requests, billed by the upstream for [\d,]+ input, [\d,]+ cache-write, [\d,]+ cache-read and [\d,]+ output tokens; 0 summary calls\. Compaction kept [\d,]+ tokens out of its prompts: about \d+% (?:less|more) than without compaction \(an estimate/
      )
    await page.screenshot({ path: join(SHOTS, 'cost.png') })
  }, 60_000)

  it('opens with an overview of what compaction did and saved for the key, filtered by time and session', async () => {
    const { page } = await tab()
    await page.goto(`${server.url}/ui/`)
    await page.getByLabel('Gateway key').fill(CAROL)
    await page.getByRole('button', { name: 'Sign in' }).click()
    // the first view: the seeding's compactions through the proxy (as many as its records), with extractive summaries (chosen: no model)
    const listed = (await (await fetch(`${server.url}/v1/sessions`, { headers: { 'x-api-key': CAROL } })).json()) as {
      sessions: { session_id: string; compactions: number }[]
    }
    const made = listed.sessions.find((s) => s.session_id === 'proxied-session')?.compactions ?? 0
    expect(made).toBeGreaterThan(0)
    const cards = page.locator('#cards')
    await expect
      .poll(() => cards.locator('dt').allTextContents(), { timeout: 20_000 })
      .toEqual(['Tokens kept out of prompts', 'Compactions', 'Crossing wait', 'Saved (estimate)'])
    const values = await cards.locator('.value').allTextContents()
    expect(Number(values[0]!.replace(/,/g, ''))).toBeGreaterThan(0)
    expect(values[1]).toBe(String(made))
    expect(values[2]).toMatch(/^[\d.,]+ (?:ms|s)$/)
    expect(values[3]).toMatch(/^-?\$[\d.,]+$/)
    expect(await cards.locator('.note').nth(1).textContent()).toMatch(new RegExp(`^${made} by the proxies, 0 by POST /v1/compact; [\\d,]+ tokens removed$`))
    expect(await page.locator('#writers-caption').textContent()).toMatch(new RegExp(`^Of ${made} summar(?:y|ies): 100% extractive, chosen\\.`))
    const waits = (await page.locator('#waits tr td:nth-child(2)').allTextContents()).map(Number)
    expect(waits.reduce((a, b) => a + b, 0)).toBe(made)
    expect(await page.locator('#savings').textContent()).toMatch(
      /^Billed: \$[\d.]+, for [\d,]+ metered requests .* Without compaction: \$[\d.]+, .* per million tokens \(COMPACT_PRICE_\*\)/
    )
    expect(await page.locator('#activity-chart canvas').count()).toBe(1)
    expect(await page.locator('#activity-caption').textContent()).toMatch(
      new RegExp(`^Compactions per day \\(bars\\) and tokens kept out of prompts per day \\(line\\); the most, ${made}, in the day from `)
    )
    await page.screenshot({ path: join(SHOTS, 'overview.png'), fullPage: true })

    // by the hour over the last day, then one session's: the seeding's session has them all, another none
    await page.getByLabel('Range').selectOption({ label: 'Last 24 hours' })
    await expect.poll(() => page.locator('#activity-caption').textContent()).toMatch(/^Compactions per hour/)
    await page.getByLabel('Conversations').selectOption('proxied-session')
    await expect.poll(() => page.locator('#overview-range').textContent()).toMatch(/, session proxied-session$/)
    expect(await cards.locator('.value').nth(1).textContent()).toBe(String(made))
    // a session opened, then the overview again from the list
    await page
      .getByRole('navigation', { name: 'Sessions' })
      .getByRole('button', { name: /proxied-session/ })
      .click()
    await expect.poll(() => page.locator('#overview').isVisible()).toBe(false)
    await page.getByRole('button', { name: /^Overview/ }).click()
    await expect.poll(() => page.locator('#overview').isVisible()).toBe(true)
    expect(await page.getByRole('button', { name: /^Overview/ }).getAttribute('aria-current')).toBe('true')
  }, 60_000)

  it('opens with no sign-in step on a gateway that takes no keys', async () => {
    const open = await startServer({ COMPACT_DB: tempDb() })
    try {
      const seeded = await fetch(`${open.url}/v1/compact`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: history(3), mode: 'manual', session_id: 'open-session', budget_tokens: 8_000 })
      })
      expect(seeded.status).toBe(200)
      const { page } = await tab()
      await page.goto(`${open.url}/ui/`)
      const sessions = page.getByRole('navigation', { name: 'Sessions' })
      await sessions.getByRole('button', { name: /open-session/ }).waitFor()
      expect(await page.getByLabel('Gateway key').isVisible()).toBe(false)
      expect(await page.getByRole('button', { name: 'Sign out' }).isVisible()).toBe(false)
      await sessions.getByRole('button', { name: /open-session/ }).click()
      await expect.poll(() => page.locator('#chart-caption').textContent()).toMatch(/^1 compaction:/)
    } finally {
      open.child.kill('SIGTERM')
      await open.exited
    }
  }, 60_000)
})
