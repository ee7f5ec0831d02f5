import { buildApp, type App, type AppOptions } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'

/** A silent app built from the given environment, as tests want it: an in-memory store unless told. */
export async function testApp(env: Record<string, string> = {}, options: Partial<AppOptions> = {}): Promise<App> {
  return buildApp({ config: loadConfig({ COMPACT_DB: ':memory:', ...env }), logger: false, ...options })
}
