import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // the real clients run in npm run e2e (vitest.e2e.config.ts)
    exclude: ['test/e2e/**', '**/node_modules/**'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // CI also writes a JSON report, from which .ci/run prints its one-line count.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest.json' }
  }
})
