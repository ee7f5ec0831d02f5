import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/process.js'

/**
 * No Docker engine runs here, so the image is checked by what it is made of: the Dockerfile's final
 * stage is read, the project is built as its build stage does, and its CMD is run with its ENV.
 */
const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n\s*/g, ' ')
const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '))
const instruction = (name: string): string[] => [...finalStage.matchAll(new RegExp(`^${name} (.+)$`, 'gm'))].map((m) => m[1]!)

function imageEnv(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of instruction('ENV')) for (const m of line.matchAll(/(\w+)=(\S+)/g)) env[m[1]!] = m[2]!
  return env
}

describe('Dockerfile', () => {
  it('is multi-stage on a pinned base, prunes dev dependencies and runs node as a non-root user', () => {
    const froms = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]!)
    expect(froms.length).toBeGreaterThanOrEqual(2)
    for (const image of froms) expect(image).toMatch(/^node:\d+\.\d+\.\d+-[a-z-]+$|@sha256:/)
    expect(dockerfile).toMatch(/npm ci\b/)
    expect(dockerfile).toMatch(/npm prune --omit=dev/)
    expect(instruction('USER')).toEqual(['node'])
    expect(JSON.parse(instruction('CMD')[0]!)[0]).toBe('node')
    expect(imageEnv()).toMatchObject({ HOST: '0.0.0.0', PORT: '8080' })
    expect(instruction('EXPOSE')).toEqual([imageEnv().PORT])
    expect(instruction('HEALTHCHECK')[0]).toContain('/healthz')
    expect(existsSync(join(ROOT, '.dockerignore'))).toBe(true)
    expect(readFileSync(join(ROOT, '.dockerignore'), 'utf8')).toMatch(/^node_modules$/m)
  })

  it("runs the build stage's commands and the final stage's CMD with its ENV here (no Docker engine), and passes its HEALTHCHECK", async () => {
    // the build stage's `npm run build` is the suite's global setup (test/global-setup.ts): run once, before every file
    expect(dockerfile).toMatch(/RUN npm run build\b/)
    const cmd = JSON.parse(instruction('CMD')[0]!) as string[]
    expect(existsSync(join(ROOT, cmd[1]!))).toBe(true)
    // the package's command-line client is built too
    const bin = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin['compaction-gateway']!
    expect(readFileSync(join(ROOT, bin), 'utf8').startsWith('#!/usr/bin/env node')).toBe(true)

    const port = String(20_000 + Math.floor(Math.random() * 20_000))
    // The image listens on all interfaces, which needs a key; nothing but loopback talks to it here.
    const env = {
      PATH: process.env.PATH ?? '',
      ...imageEnv(),
      PORT: port,
      COMPACT_DB: ':memory:',
      COMPACT_API_KEYS: 'ci=test-key-0000000123',
      LOG_LEVEL: 'warn'
    }
    const child = spawn(cmd[0] === 'node' ? process.execPath : cmd[0]!, cmd.slice(1), { cwd: ROOT, env })
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)))
    try {
      const healthcheck = JSON.parse(instruction('HEALTHCHECK')[0]!.replace(/^.*?CMD /, '')) as string[]
      let code: number | null = 1
      for (let i = 0; i < 100 && code !== 0; i++) {
        await new Promise((r) => setTimeout(r, 100))
        code = await new Promise<number | null>((res) => {
          const h = spawn(process.execPath, healthcheck.slice(1), { env: { ...env } })
          h.once('exit', (c) => res(c))
        })
      }
      expect(code).toBe(0)
    } finally {
      child.kill('SIGTERM')
    }
    expect(await exited).toBe(0)
  }, 60_000)
})
