import { Writable } from 'node:stream'
import pino from 'pino'
import { describe, expect, it } from 'vitest'
import { loggableUrl, loggerOptions } from '../../src/telemetry/logger.js'

describe('loggableUrl', () => {
  it('keeps the path and the names of query parameters, never their values', () => {
    expect(loggableUrl('/v1/sessions/s1/compactions?limit=20&key=sk-secret')).toBe('/v1/sessions/s1/compactions?limit=…&key=…')
    expect(loggableUrl('/healthz')).toBe('/healthz')
  })
})

describe('loggerOptions', () => {
  it('writes no credential header and no query value into a line', () => {
    const lines: string[] = []
    const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) })
    const log = pino(loggerOptions('info'), sink)
    log.info({ req: { method: 'GET', url: '/x?token=abc123', headers: { authorization: 'Bearer abc123', 'x-api-key': 'abc123' } } }, 'hello')
    const line = JSON.parse(lines[0] ?? '{}') as { req: Record<string, unknown>; service: string; time: string }
    expect(lines.join('')).not.toContain('abc123')
    expect(line.req.url).toBe('/x?token=…')
    expect(line.service).toBe('compaction-gateway')
    expect(Number.isNaN(Date.parse(line.time))).toBe(false)
  })
})
