import { buildApp, type App, type AppOptions } from '../../src/server/app.js'
import { loadConfig } from '../../src/server/config.js'

/** A silent app built from the given environment, as tests want it. */
export async function testApp(env: Record<string, string> = {}, options: Partial<AppOptions> = {}): Promise<App> {
  return buildApp({ config: loadConfig(env), logger: false, ...options })
}
