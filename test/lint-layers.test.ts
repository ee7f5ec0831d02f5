import { ESLint } from 'eslint'
import { describe, expect, it } from 'vitest'

/**
 * The layer rules of eslint.config.js, as lint reads them: an import that reaches up is refused from a module
 * at any depth of its layer (a dialect under proxy/dialects/ as well as proxy/'s own modules), and one that
 * reaches down or stays home is not.
 */
const eslint = new ESLint()

async function refused(filePath: string, from: string): Promise<boolean> {
  const [result] = await eslint.lintText(`import { x } from '${from}'\nexport const y = x\n`, { filePath })
  return (result?.messages ?? []).some((m) => m.ruleId === 'no-restricted-imports')
}

describe('the layer rules', () => {
  it('refuse an upward import from a module at any depth of its layer', async () => {
    const upward: [string, string][] = [
      ['src/proxy/anchors.ts', '../service/proxied.js'],
      ['src/proxy/dialects/messages.ts', '../../service/proxied.js'],
      ['src/proxy/dialects/messages.ts', '../../server/app.js'],
      ['src/service/compact.ts', '../server/app.js'],
      ['src/service/nested/part.ts', '../../workers/pool.js'],
      ['src/contract/schemas.ts', '../storage/store.js'],
      ['src/contract/nested/part.ts', '../../service/compact.js'],
      ['src/server/routes/compact.ts', '../../cli/main.js'],
      ['src/storage/sqlite.ts', '../service/compact.js'],
      ['src/compaction/plan.ts', '../contract/schemas.js'],
      ['src/compaction/plan.ts', 'node:fs']
    ]
    for (const [file, from] of upward) expect(await refused(file, from), `${file} importing ${from}`).toBe(true)
  })

  it('let a module import its own layer and the layers below it', async () => {
    const allowed: [string, string][] = [
      ['src/proxy/dialects/messages.ts', '../anchors.js'],
      ['src/proxy/dialects/messages.ts', '../../contract/schemas.js'],
      ['src/service/compact.ts', '../storage/store.js'],
      ['src/contract/schemas.ts', '../compaction/index.js'],
      ['src/contract/nested/part.ts', '../../compaction/index.js'],
      ['src/server/routes/compact.ts', '../../service/compactions.js'],
      ['src/compaction/plan.ts', './types.js']
    ]
    for (const [file, from] of allowed) expect(await refused(file, from), `${file} importing ${from}`).toBe(false)
  })
})
