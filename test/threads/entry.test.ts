import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { startThread, threadModule } from '../../src/threads/entry.js'

/** The folders the tests made, removed after them. */
const made: string[] = []
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true })
})

/** A project of its own: src/x/t.ts and, if asked, its build dist/x/t.js, the build's stamp `stampAge` seconds older than the sources. */
function project(options: { built: boolean; stampAge?: number }): string {
  const root = mkdtempSync(join(tmpdir(), 'compaction-gateway-threads-'))
  made.push(root)
  mkdirSync(join(root, 'src', 'x'), { recursive: true })
  writeFileSync(join(root, 'package.json'), '{ "type": "module" }\n')
  writeFileSync(join(root, 'src', 'x', 't.ts'), 'export {}\n')
  writeFileSync(join(root, 'src', 'x', 'starts.ts'), 'export {}\n')
  if (options.built) {
    mkdirSync(join(root, 'dist', 'x'), { recursive: true })
    writeFileSync(join(root, 'dist', 'x', 't.js'), 'export {}\n')
    if (options.stampAge !== undefined) {
      writeFileSync(join(root, 'dist', '.built'), '')
      const at = Date.now() / 1_000
      for (const f of ['src/x/t.ts', 'src/x/starts.ts', 'src/x', 'src']) utimesSync(join(root, f), at, at)
      utimesSync(join(root, 'dist', '.built'), at - options.stampAge, at - options.stampAge)
    }
  }
  return pathToFileURL(join(root, 'src', 'x', 'starts.ts')).href
}

describe("a thread's code", () => {
  it('is the built copy beside its starter when there is one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'compaction-gateway-threads-'))
    made.push(dir)
    const from = pathToFileURL(join(dir, 'starts.js')).href
    writeFileSync(new URL('./t.js', from), 'export {}\n')
    expect(threadModule(from, 't')).toEqual({ url: new URL('./t.js', from), fromSource: false })
  })

  it("run from the sources: the build's copy where the build is newer than every source, else the source itself", () => {
    const current = project({ built: true, stampAge: -5 })
    expect(threadModule(current, 't').url.pathname).toMatch(/\/dist\/x\/t\.js$/)
    const stale = project({ built: true, stampAge: 60 })
    expect(threadModule(stale, 't')).toMatchObject({ fromSource: true })
    expect(threadModule(stale, 't').url.pathname).toMatch(/\/src\/x\/t\.ts$/)
    expect(threadModule(project({ built: true }), 't')).toMatchObject({ fromSource: true })
    expect(threadModule(project({ built: false }), 't')).toMatchObject({ fromSource: true })
  })

  it('starts from the sources through tsx, and from a build', async () => {
    for (const built of [false, true]) {
      const from = project({ built, stampAge: -5 })
      // TypeScript only tsx can run (a type and a non-null assertion), or the build's JavaScript
      writeFileSync(
        new URL('./t.ts', from),
        "import { parentPort } from 'node:worker_threads'\nconst said: string = 'up from source'\nparentPort!.postMessage(said)\n"
      )
      if (built)
        writeFileSync(new URL('../../dist/x/t.js', from), "import { parentPort } from 'node:worker_threads'\nparentPort.postMessage('up from the build')\n")
      const worker = startThread(from, 't')
      expect(await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject))).toBe(built ? 'up from the build' : 'up from source')
      await worker.terminate()
    }
  })
})
