import { PassThrough } from 'node:stream'
import { buildApp, type App, type AppOptions } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'

/** A silent app built from the given environment, as tests want it: an in-memory store unless told. */
export async function testApp(env: Record<string, string> = {}, options: Partial<AppOptions> = {}): Promise<App> {
  return buildApp({ config: loadConfig({ COMPACT_DB: ':memory:', ...env }), logger: false, ...options })
}

/** A stream for an app's log (AppOptions.logStream) and the lines written to it so far, each parsed. */
export function capturedLog(): { stream: PassThrough; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = []
  const stream = new PassThrough()
  stream.on('data', (d: Buffer) =>
    lines.push(
      ...d
        .toString()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    )
  )
  return { stream, lines }
}
