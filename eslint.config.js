import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/**
 * Layers only reach down: server → service → (summarizer, storage, memory, secrets) →
 * contract, prompts → compaction. Each folder lists the ones above or beside it that it must not import.
 */
const layer = (folder, banned, why) => ({
  files: [`src/${folder}/**/*.ts`],
  rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: banned, message: why }] }] }
})

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }]
    }
  },
  // In src, an index or a match that may be undefined is handled, never asserted away.
  { files: ['src/**/*.ts'], rules: { '@typescript-eslint/no-non-null-assertion': 'error' } },
  layer('compaction', '^(?!\\./)', 'the core is pure: it imports nothing but its own modules (no package, no node:, no other layer)'),
  layer('contract', '^(\\.\\./)+(?!\\.\\./|compaction/)', 'the API contract builds on the core alone'),
  layer('prompts', '^(\\.\\./)+(?!\\.\\./|compaction/)', 'the doctrine builds on the core alone'),
  layer('memory', '^(\\.\\./)+(?!\\.\\./|compaction/)', "the cold layer's pure part builds on the core alone"),
  layer('secrets', '^(\\.\\./)+(?!\\.\\./|compaction/)', 'redaction builds on the core alone'),
  layer('formats', '^(\\.\\./)+(?!\\.\\./|compaction/)', 'the API formats are adapters over the core alone'),
  layer('storage', '^(\\.\\./)+(server|service|summarizer|workers|cli|memory|secrets)/', 'storage knows nothing of the layers that use it'),
  layer('summarizer', '^(\\.\\./)+(server|service|workers|cli)/', 'summarizers know nothing of the service or the HTTP server'),
  layer('telemetry', '^(\\.\\./)+(server|service|workers|cli)/', 'telemetry knows nothing of the layers that use it'),
  layer('service', '^(\\.\\./)+(server|workers|cli)/', 'the service knows nothing of the HTTP server'),
  layer('proxy', '^(\\.\\./)+(server|service|workers|cli)/', 'the proxy knows nothing of the service that uses it nor of the HTTP server that serves it'),
  layer('workers', '^(\\.\\./)+(server|cli)/', 'workers run the service, never the HTTP server'),
  layer('server', '^(\\.\\./)+cli/', 'the server knows nothing of the command-line client'),
  layer('threads', '^\\.\\./', "where a thread's code is found: it imports nothing of the project's other layers"),
  // A test file imported by another registers its tests there too, or not, by the order files run in.
  {
    files: ['test/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '\\.test\\.js$', message: 'what tests share lives in test/helpers/, never in a test file' }] }]
    }
  }
)
