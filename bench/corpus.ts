import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Message } from '../src/compaction/index.js'

export interface Transcript {
  name: string
  messages: Message[]
  system?: string
  metadata?: { ground_truth?: { files_in_final_diff?: string[] } }
  /** The file's own text, as a client would send it. */
  raw: string
}

const ROOT = resolve(import.meta.dirname, '..')

/** The folder named on the command line, else the shared corpus beside the repository, else the fixtures. */
export function corpusDir(arg: string | undefined): string {
  if (arg) return resolve(arg)
  const shared = resolve(ROOT, '../shared/corpus')
  return existsSync(shared) ? shared : resolve(ROOT, 'test/fixtures/corpus')
}

export function loadCorpus(dir: string): Transcript[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const raw = readFileSync(join(dir, f), 'utf8')
      return { name: f.replace(/\.json$/, ''), raw, ...(JSON.parse(raw) as Omit<Transcript, 'name' | 'raw'>) }
    })
}

export function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))]
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)))
  const line = (r: string[]) => `| ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`
  return [line(cells[0]!), `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...cells.slice(1).map(line)].join(
    '\n'
  )
}

export function short(name: string, max = 44): string {
  return name.length <= max ? name : `${name.slice(0, max - 1)}…`
}

const BENCH_STARTED = performance.now()

/** One line on stderr saying what a long benchmark is doing now (the results go to stdout at the end). */
export function progress(step: string): void {
  process.stderr.write(`[${((performance.now() - BENCH_STARTED) / 1000).toFixed(0).padStart(4)} s] ${step}…\n`)
}
