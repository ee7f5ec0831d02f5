import type { AddressInfo } from 'node:net'
import Anthropic from '@anthropic-ai/sdk'
import { describe, expect, it } from 'vitest'
import { LENGTH_BINS, inControlGroup, lengthBin, measuredSavings } from '../../src/service/control.js'
import { testApp } from '../helpers/app.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, shellStep, user } from '../helpers/history.js'
import { until } from '../helpers/wait.js'

describe('the control group', () => {
  it('takes about its share of conversations, each always the same way, and none or all at the ends', () => {
    const sessions = Array.from({ length: 10_000 }, (_, i) => `session-${i}`)
    for (const share of [0.05, 0.2, 0.5]) {
      const taken = sessions.filter((s) => inControlGroup('acme', s, share)).length / sessions.length
      expect(Math.abs(taken - share)).toBeLessThan(0.02)
    }
    expect(sessions.slice(0, 100).map((s) => inControlGroup('acme', s, 0.3))).toEqual(sessions.slice(0, 100).map((s) => inControlGroup('acme', s, 0.3)))
    expect(sessions.some((s) => inControlGroup('acme', s, 0))).toBe(false)
    expect(sessions.every((s) => inControlGroup('acme', s, 1))).toBe(true)
  })

  it('bins requests by the length of the history sent', () => {
    expect(lengthBin(0)).toBe(0)
    expect(lengthBin(24_999)).toBe(0)
    expect(lengthBin(25_000)).toBe(1)
    expect(lengthBin(199_999)).toBe(LENGTH_BINS.length - 2)
    expect(lengthBin(5_000_000)).toBe(LENGTH_BINS.length - 1)
  })

  it('compares the groups bin by bin, the treated with their summary calls, with a 95% interval', () => {
    // one bin: treated requests billed 80 and 120 units, control 180 and 220
    const tallies = { treated: [{ n: 2, units: 200, squares: 80 ** 2 + 120 ** 2 }], control: [{ n: 2, units: 400, squares: 180 ** 2 + 220 ** 2 }] }
    const m = measuredSavings(tallies, 0)
    expect(m).toMatchObject({ treated_requests: 2, control_requests: 2, saved_share: 0.5 })
    // each mean's variance 800 / 2; the difference's, weighed by the control's 2 requests, 4 × 800; half width 1.96 × √3200 / (2 × 200)
    expect(m?.interval).toEqual({ low: 0.223, high: 0.777 })
    expect(m?.bins[0]).toEqual({
      from_tokens: 0,
      to_tokens: 25_000,
      treated: { requests: 2, units_per_request: 100 },
      control: { requests: 2, units_per_request: 200 }
    })
    // 40 units of summary calls spread over the 2 treated requests: 120 against 200
    expect(measuredSavings(tallies, 40)?.saved_share).toBe(0.4)
    // a bin the other group lacks is left out of the comparison; one request of a group gives no interval
    const apart = measuredSavings({ treated: [{ n: 3, units: 300, squares: 30_000 }], control: [undefined, { n: 1, units: 500, squares: 250_000 }] }, 0)
    expect(apart).toMatchObject({ saved_share: null, interval: null, control_requests: 1 })
    expect(measuredSavings({ treated: [{ n: 3, units: 300, squares: 30_000 }], control: [{ n: 1, units: 200, squares: 40_000 }] }, 0)).toMatchObject({
      saved_share: 0.5,
      interval: null
    })
    expect(measuredSavings({ treated: [{ n: 3, units: 300, squares: 30_000 }], control: [] }, 0)).toBeNull()
  })

  it('sends its conversations through uncompacted, and the overview measures the treated against it', async () => {
    const fake = await new FakeAnthropic().start()
    fake.fallback = { text: 'ok' }
    const app = await testApp({
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: 'sk-ant-upstream-control-0000000',
      COMPACT_SUMMARIZER: 'extractive',
      COMPACT_BUDGET: '6000',
      COMPACT_PRECOMPUTE_AT: 'off',
      COMPACT_CONTROL_SHARE: '0.5'
    })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const sdk = new Anthropic({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, maxRetries: 0 })
      const history = (i: number) => [
        user(`Fix the flaky test number ${i}`),
        ...Array.from({ length: 30 }, (_, k) => shellStep(`toolu_${i}_${k}`, `pytest -k case_${k}`, `case ${k}: ${'log line '.repeat(100)}`)).flat(),
        assistant('Ran every case.'),
        user('and now?')
      ]
      const outcomes: string[] = []
      for (let i = 0; i < 24; i++) {
        const { response } = await sdk.messages
          .create(
            { model: 'claude-any', max_tokens: 16, messages: history(i) as Anthropic.MessageParam[] },
            { headers: { 'x-compaction-session': `conv-${i}` } }
          )
          .withResponse()
        outcomes.push(response.headers.get('x-compaction') ?? '')
      }
      expect(fake.refused).toEqual([])
      const compacted = outcomes.filter((o) => o === 'compacted').length
      const uncompacted = outcomes.filter((o) => o === 'none').length
      expect(compacted + uncompacted).toBe(24)
      expect(compacted).toBeGreaterThan(0)
      expect(uncompacted).toBeGreaterThan(0)
      // the uncompacted ones went as the client sent them: every message, and no tool of the gateway's
      const whole = fake.requests.filter((r) => r.body.messages.length === history(0).length)
      expect(whole).toHaveLength(uncompacted)
      expect(whole.every((r) => (r.body.tools ?? []).length === 0)).toBe(true)
      const read = async () => (await app.inject({ url: '/v1/overview' })).json()
      await until('every answer is tallied', async () => {
        const m = (await read()).measured
        return m !== null && m.treated_requests + m.control_requests === 24
      })
      const measured = (await read()).measured
      expect(measured).toMatchObject({ treated_requests: compacted, control_requests: uncompacted })
      // the compacted requests billed less than the same lengths sent whole
      expect(measured.saved_share).toBeGreaterThan(0)
      expect(measured.interval.low).toBeLessThanOrEqual(measured.saved_share)
      expect(measured.interval.high).toBeGreaterThanOrEqual(measured.saved_share)
      // a conversation of the control group says so in its cost
      const costs = await Promise.all(outcomes.map(async (_o, i) => (await app.inject({ url: `/v1/sessions/conv-${i}/cost` })).json().control as boolean))
      expect(costs).toEqual(outcomes.map((o) => o === 'none'))
    } finally {
      await app.close()
      await fake.close()
    }
  })
})
