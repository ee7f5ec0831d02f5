import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { Message } from '../../src/compaction/index.js'
import { serviceRedact } from '../../src/secrets/index.js'
import { FakeAnthropic } from '../helpers/fake-anthropic.js'
import { assistant, call, result, results, user } from '../helpers/history.js'
import { startServer, tempDb } from '../helpers/process.js'
import { type Planted, plantSecrets } from '../helpers/secrets.js'

/**
 * A history that carries every planted secret in the part that is summarized: in prompts, in tool
 * calls, in tool outputs (one of them a long output whose private key sits in the clipped middle), in
 * assistant text. The kept tail carries none, since the tail is the client's own and comes back as sent.
 */
function historyWith(planted: Planted[]): Message[] {
  const messages: Message[] = [
    user(
      `deploy it; the config is:\n${planted
        .slice(0, 10)
        .map((p) => p.text)
        .join('\n')}`
    )
  ]
  planted.slice(10).forEach((p, i) => {
    const id = `toolu_${i}`
    // in a command, in a file the agent writes (its input's JSON escapes every line break and quote), in an output
    const where = i % 3
    const input =
      where === 0
        ? { command: p.text }
        : where === 1
          ? { file_path: `config/${i}.env`, content: `# written by the agent\n${p.text}\n` }
          : { command: `cat config/${i}.env` }
    messages.push(assistant(`step ${i}`, call(id, where === 1 ? 'Write' : 'bash', input)))
    messages.push(results(result(id, where === 2 ? `loaded:\n${p.text}\n` : 'ok')))
  })
  // a long output: the key's BEGIN line ends up in the part a clip removes
  const pem = planted.find((p) => p.kind === 'pem private key')!
  const filler = Array.from({ length: 3_000 }, (_, k) => `line ${k} of the build log`).join('\n')
  messages.push(assistant('reading the log', call('toolu_log', 'bash', { command: 'cat build.log' })))
  messages.push(results(result('toolu_log', `${filler}\n${pem.text}\n${filler}`)))
  messages.push(assistant(`I saw ${planted[12]!.secret} in the output; moving on.`))
  messages.push(user('now run the tests'))
  messages.push(assistant('running them'))
  messages.push(user('thanks, go on'))
  return messages
}

function leaks(haystack: string, planted: Planted[]): string[] {
  return planted.filter((p) => haystack.includes(p.secret)).map((p) => p.kind)
}

describe('planted secrets of every kind', () => {
  it('are found by the service redaction, each of them', () => {
    for (const p of plantSecrets()) {
      const out = serviceRedact(p.text)
      expect(out.includes(p.secret), `${p.kind}: ${out}`).toBe(false)
      expect(out).toContain('[REDACTED:')
    }
  })

  it('reach neither the model, nor a response, nor the SQLite files, nor the logs, when the model repeats them back', async () => {
    const planted = plantSecrets()
    const fake = await new FakeAnthropic().start()
    // A model that repeats every secret back, in every section it writes.
    const all = planted.map((p) => p.secret).join(' ')
    fake.fallback = {
      toolInput: {
        objective: `deploy with ${all}`,
        key_decisions: planted.map((p) => `use ${p.text}`),
        failing_tests_and_errors: [all],
        next_steps: [`rotate ${all}`]
      }
    }
    const db = tempDb()
    const server = await startServer({ ANTHROPIC_API_KEY: 'sk-ant-test-planted-0000000000', ANTHROPIC_BASE_URL: fake.url, COMPACT_DB: db, LOG_LEVEL: 'debug' })
    const noKey = await startServer({ COMPACT_DB: tempDb(), LOG_LEVEL: 'debug' })
    try {
      const body = JSON.stringify({
        mode: 'manual',
        keep_turns: 1,
        session_id: 'planted',
        messages: historyWith(planted),
        instructions: `focus on ${planted[5]!.text}`,
        recall_hint: `grep the log; token ${planted[6]!.secret}`
      })
      const answers: string[] = []
      for (const url of [server.url, server.url, noKey.url]) {
        const res = await fetch(`${url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        expect(res.status).toBe(200)
        answers.push(await res.text())
      }
      const records = await (await fetch(`${server.url}/v1/sessions/planted/compactions`)).text()
      expect(JSON.parse(answers[0]!).summarizer.kind).toBe('anthropic')
      expect(JSON.parse(answers[1]!).summarizer.kind).toBe('cache')
      expect(JSON.parse(answers[2]!).summarizer.kind).toBe('extractive')

      expect(fake.requests.length).toBeGreaterThan(0)
      expect(leaks(fake.requests.map((r) => r.raw).join('\n'), planted)).toEqual([])
      expect(leaks(answers.join('\n') + records, planted)).toEqual([])
      const files = readdirSync(dirname(db)).map((f) => readFileSync(join(dirname(db), f)).toString('latin1'))
      expect(files.length).toBeGreaterThanOrEqual(2) // the database and its -wal
      expect(leaks(files.join('\n'), planted)).toEqual([])
      expect(leaks(server.stdout() + server.stderr() + noKey.stdout() + noKey.stderr(), planted)).toEqual([])
      // what was redacted is said so, by kind
      expect(answers[0]).toContain('[REDACTED:')
    } finally {
      server.child.kill('SIGKILL')
      noKey.child.kill('SIGKILL')
      await fake.close()
    }
  }, 60_000)
})
