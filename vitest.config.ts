import { defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

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

/**
 * The tests that take longest (of the processes: a CPU-bound load run, real waits), started first. Vitest runs the
 * files it has timed longest first, but a fresh clone (CI) has no timings, and it then runs the largest
 * files first: the load run's small file came last and ran alone at the end for half a minute.
 */
const LONGEST = [
  'test/server/load.test.ts',
  'test/server/admission.test.ts',
  'test/server/shutdown.test.ts',
  'test/ui/page.test.ts',
  'test/server/timeouts.test.ts',
  'test/server/store-faults.test.ts',
  // and the fast project's longest, so that neither of its two workers ends alone on one of them
  'test/server/fuzz.test.ts',
  'test/server/hostile.test.ts',
  'test/storage/store.test.ts',
  'test/compaction/properties.test.ts',
  'test/compaction/properties-manual.test.ts'
]
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification): number => {
      const i = LONGEST.findIndex((path) => f.moduleId.endsWith(path))
      return i < 0 ? LONGEST.length : i
    }
    // a stable sort: the other files keep Vitest's own order
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}

/** What both projects share (globalSetup stays at the root: it runs once, whichever projects run). */
const shared = { testTimeout: 30_000, hookTimeout: 30_000 }

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    // both cores: most files wait on sockets and timers as much as they compute
    maxWorkers: 2,
    sequence: { sequencer: LongestFirst },
    // CI also writes a JSON report, from which .ci/run prints its one-line count.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest.json' },
    projects: [
      // the real clients run in npm run e2e (vitest.e2e.config.ts)
      // One module graph a worker, not one a file: a file's imports (Fastify, the SDKs, the core) took longer
      // than most files' tests. The files leave no state behind them: each builds its own app and store.
      { test: { ...shared, name: 'fast', isolate: false, include: ['test/**/*.test.ts'], exclude: ['test/e2e/**', '**/node_modules/**', ...PROCESSES] } },
      // (the processes' files alike: none of them mocks or stubs a module, and each paid its imports again)
      { test: { ...shared, name: 'processes', isolate: false, include: PROCESSES } }
    ]
  }
})
