import Fastify from 'fastify'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/server/config.js'
import { compactionPlugin } from '../../src/server/plugins/compaction.js'
import { metricsPlugin } from '../../src/server/plugins/metrics.js'
import { proxyPlugin } from '../../src/server/plugins/proxy.js'
import { sharedStatePlugin } from '../../src/server/plugins/shared-state.js'
import { storePlugin } from '../../src/server/plugins/store.js'

describe('the app as plugins with declared dependencies', () => {
  it('refuses to build the summarizer stack before the store it caches in', async () => {
    const app = Fastify({ logger: false })
    await app.register(metricsPlugin)
    await expect(app.register(compactionPlugin, { config: loadConfig({ COMPACT_DB: ':memory:' }), now: Date.now })).rejects.toThrow(/dependency 'store'/)
    await app.close()
  })

  it('builds in order: metrics, store, shared state, then compaction; each decorates the app', async () => {
    const app = Fastify({ logger: false })
    await app.register(metricsPlugin)
    await app.register(storePlugin, { db: ':memory:', retentionDays: 30, now: Date.now })
    await app.register(sharedStatePlugin, { url: undefined })
    await app.register(compactionPlugin, { config: loadConfig({ COMPACT_DB: ':memory:', COMPACT_WORKERS: '0' }), now: Date.now })
    await app.ready()
    expect(app.compaction.deps.extractive.kind).toBe('extractive')
    expect(app.compaction.deps.modelSummarizer).toBeUndefined()
    expect(app.compaction.pool).toBeUndefined()
    await expect(app.store.checkWritable()).resolves.toBeUndefined()
    await app.close()
  })

  it('refuses to build the proxy before the compaction it uses', async () => {
    const app = Fastify({ logger: false })
    await app.register(metricsPlugin)
    await expect(app.register(proxyPlugin, { config: loadConfig({ COMPACT_DB: ':memory:' }), keys: {} })).rejects.toThrow(/dependency 'compaction'/)
    await app.close()
  })
})
