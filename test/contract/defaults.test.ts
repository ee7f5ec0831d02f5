import { describe, expect, it } from 'vitest'
import * as defaults from '../../src/contract/defaults.js'
import { loadConfig } from '../../src/server/config.js'

describe('the defaults, in one place', () => {
  it('are the values a server started with no setting runs with', () => {
    const config = loadConfig({})
    expect(config.PORT).toBe(defaults.DEFAULT_PORT)
    expect(config.HOST).toBe(defaults.DEFAULT_HOST)
    expect(config.COMPACT_BUDGET).toBe(defaults.DEFAULT_BUDGET_TOKENS)
    expect(config.COMPACT_KEEP_TURNS).toBe(defaults.DEFAULT_KEEP_TURNS)
    expect(config.COMPACT_BODY_LIMIT_MB).toBe(defaults.DEFAULT_BODY_LIMIT_MB)
    expect(config.COMPACT_SHUTDOWN_GRACE_MS).toBe(defaults.DEFAULT_SHUTDOWN_GRACE_MS)
    expect(config.COMPACT_PRECOMPUTE_AT).toBe(defaults.DEFAULT_PRECOMPUTE_AT)
    expect(config.COMPACT_TARGET_SHARE).toBe(defaults.DEFAULT_TARGET_SHARE)
  })

  it('hold together: each default within its maximum, timeouts in the order a request meets them', () => {
    expect(defaults.DEFAULT_PAGE_SIZE).toBeLessThanOrEqual(defaults.MAX_PAGE_SIZE)
    expect(defaults.DEFAULT_TIMELINE_POINTS).toBeLessThanOrEqual(defaults.MAX_TIMELINE_POINTS)
    expect(defaults.DEFAULT_RECALL_LIMIT).toBeLessThanOrEqual(defaults.MAX_RECALL_LIMIT)
    // the headers come before the body: their bound is the shorter
    expect(defaults.HEADERS_TIMEOUT_MS).toBeLessThan(defaults.DEFAULT_BODY_TIMEOUT_MS)
    // a kept-alive connection outlives a load balancer's usual 60 s idle timeout, so the balancer closes it first
    expect(defaults.KEEP_ALIVE_TIMEOUT_MS).toBeGreaterThan(60_000)
    // a proxied conversation's anchors outlive its session in memory, so a restart finds them
    expect(defaults.ANCHOR_TTL_MS).toBeGreaterThan(defaults.PROXY_SESSION_IDLE_MS)
  })
})
