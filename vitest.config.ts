import { defineConfig } from 'vitest/config'

/**
 * The tests that run processes (the server, the CLI, a browser, a load run, an image's build) or wait on
 * real time: a project of their own, `npm run test:processes`, which .ci/run runs after `npm test`. The
 * rest, `npm test`, is what a change is checked with while it is made.
 */
const PROCESSES = [
  'test/cli/cli.test.ts',
  'test/contract/client.test.ts',
  'test/proxy/process.test.ts',
  'test/secrets/planted.test.ts',
  'test/server/abort.test.ts',
  'test/server/admission.test.ts',
  'test/server/crash.test.ts',
  'test/server/deletion.test.ts',
  'test/server/dockerfile.test.ts',
  'test/server/load.test.ts',
  'test/server/memory.test.ts',
  'test/server/process.test.ts',
  'test/server/sessions.test.ts',
  'test/server/shutdown.test.ts',
  'test/server/store-faults.test.ts',
  'test/server/timeouts.test.ts',
  'test/ui/page.test.ts'
]

/** What both projects share (globalSetup stays at the root: it runs once, whichever projects run). */
const shared = { testTimeout: 30_000, hookTimeout: 30_000 }

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    // both cores: most files wait on sockets and timers as much as they compute
    maxWorkers: 2,
    // CI also writes a JSON report, from which .ci/run prints its one-line count.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest.json' },
    projects: [
      // the real clients run in npm run e2e (vitest.e2e.config.ts)
      // One module graph a worker, not one a file: a file's imports (Fastify, the SDKs, the core) took longer
      // than most files' tests. The files leave no state behind them: each builds its own app and store.
      { test: { ...shared, name: 'fast', isolate: false, include: ['test/**/*.test.ts'], exclude: ['test/e2e/**', '**/node_modules/**', ...PROCESSES] } },
      { test: { ...shared, name: 'processes', include: PROCESSES } }
    ]
  }
})
