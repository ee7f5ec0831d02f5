import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Message } from '../../src/compaction/index.js'

export interface Transcript {
  name: string
  messages: Message[]
  system?: string
  metadata?: { ground_truth?: { files_in_final_diff?: string[] } }
}

const here = dirname(fileURLToPath(import.meta.url))
export const FIXTURE_DIR = resolve(here, '../fixtures/corpus')
/** The shared corpus beside the repository, where it exists (a developer's machine and CI). */
export const SHARED_CORPUS_DIR = resolve(here, '../../../shared/corpus')

export function loadTranscripts(dir: string): Transcript[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f.replace(/\.json$/, ''), ...(JSON.parse(readFileSync(join(dir, f), 'utf8')) as Omit<Transcript, 'name'>) }))
}

/** The project's fixtures, plus the shared corpus when it is there. */
export function allTranscripts(): Transcript[] {
  const fixtures = loadTranscripts(FIXTURE_DIR)
  const names = new Set(fixtures.map((t) => t.name))
  return [...fixtures, ...loadTranscripts(SHARED_CORPUS_DIR).filter((t) => !names.has(t.name))]
}
