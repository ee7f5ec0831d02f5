import { defineConfig } from 'vitest/config'

/** npm run e2e: the real clients, through real gateway processes (scripts/install-clients.sh installs them). */
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    // the gateway processes run the built entry point, built once here
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest-e2e.json' }
  }
})
