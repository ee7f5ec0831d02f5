import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { testApp } from '../helpers/app.js'
import { assistant, shellStep, user } from '../helpers/history.js'

/** A harness's preamble, the same for every conversation of a key, before each user's own task. */
const preamble = (repo: string): string =>
  [
    `I've uploaded a code repository in the directory ${repo}. Consider the task described below.`,
    'Can you help me implement the necessary changes to the repository so that the requirements are met?',
    'I have already taken care of all changes to any of the test files, so you do not need to modify the testing logic.',
    'Your task is to make the minimal changes to non-test files in the repository to ensure the task is satisfied.'
  ].join('\n')

function history(repo: string, task: string) {
  const steps = Array.from({ length: 6 }, (_, i) =>
    shellStep(`c${i}`, `grep -n item${i} src/app.py`, `src/app.py:${i}: item${i}\n<returncode>0</returncode>`)
  ).flat()
  return [user(`${preamble(repo)}\n\n${task}`), ...steps, assistant('Looked at every item.'), user('go on')]
}

describe("text the key's other conversations sent", () => {
  let app: FastifyInstance
  beforeAll(async () => {
    app = await testApp({ COMPACT_WORKERS: '0', COMPACT_API_KEYS: 'acme=key-acme-0000000001,other=key-other-000000001' })
  })
  afterAll(async () => app.close())

  const compact = async (key: string, session: string, repo: string, task: string) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/compact',
      headers: { 'x-api-key': key },
      payload: { messages: history(repo, task), mode: 'manual', keep_turns: 1, session_id: session }
    })
    expect(res.statusCode, res.body).toBe(200)
    return (res.json() as { summary: { text: string } }).summary.text
  }

  it('is left out of a summary once two other conversations of the key sent it, and never for another key', async () => {
    const first = await compact('key-acme-0000000001', 'sess-h-1', '/work/alpha', 'The importer drops the last row of every CSV file it reads.')
    expect(first).toContain('make the minimal changes to non-test files')
    // the same conversation again (a retry, a resume) is not another one
    await compact('key-acme-0000000001', 'sess-h-1', '/work/alpha', 'The importer drops the last row of every CSV file it reads.')
    const second = await compact('key-acme-0000000001', 'sess-h-2', '/work/beta', 'Dates in UTC+14 parse one day early in the report view.')
    expect(second).toContain('make the minimal changes to non-test files')
    const third = await compact('key-acme-0000000001', 'sess-h-3', '/work/gamma', 'Retries never cap their wait at sixty seconds.')
    expect(third).toContain('Retries never cap their wait at sixty seconds.')
    expect(third).not.toContain('make the minimal changes to non-test files')
    expect(third).toMatch(/\[harness text left out \(other sessions sent it too\), "I've uploaded a code repository/)
    // another key has seen none of it
    const elsewhere = await compact('key-other-000000001', 'sess-h-4', '/work/delta', 'Exports lose the header row.')
    expect(elsewhere).toContain('make the minimal changes to non-test files')
  })
})
