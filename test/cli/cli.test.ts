import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { validateHistory } from '../../src/compaction/index.js'
import { FIXTURE_DIR } from '../helpers/corpus.js'
import { responseValidator } from '../helpers/openapi.js'
import { CLI_ENTRY, ROOT, type ServerProcess, nodeArgs, startServer, tempDb } from '../helpers/process.js'

const fixture = join(FIXTURE_DIR, 'mini-swe-agent__django__django-11149.json')

/** Runs the CLI as a real process; stderr is not a terminal here, so no spinner. */
function cli(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, nodeArgs(CLI_ENTRY, ...args), { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    if (stdin !== undefined) child.stdin.end(stdin)
    else child.stdin.end()
    child.once('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

let server: ServerProcess
beforeAll(async () => {
  server = await startServer({ COMPACT_API_KEYS: 'cli=key-cli-000000000000' })
})
afterAll(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

describe('compaction-gateway compact', () => {
  it('writes with --out a compacted history that is a valid request body again', async () => {
    const out = join(tempDb(), '..', 'next.json')
    const { code, stdout, stderr } = await cli(['compact', fixture, '--url', server.url, '--key', 'key-cli-000000000000', '--out', out])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    // for a person: the summary, then the figures
    expect(stdout).toMatch(/^<compaction-summary id="cmp_/)
    expect(stdout).toMatch(/tokens before\s+[\d,]+/)
    expect(stdout).toMatch(/tokens after\s+[\d,]+/)
    expect(stdout).toMatch(/summarizer\s+extractive/)
    const next = JSON.parse(readFileSync(out, 'utf8')) as { messages: unknown[]; system?: string }
    expect(validateHistory(next.messages as never)).toBeUndefined()
    expect(next.system).toBe((JSON.parse(readFileSync(fixture, 'utf8')) as { system: string }).system)
    // ...and the service takes it as it is
    const again = await fetch(`${server.url}/v1/compact`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'key-cli-000000000000' },
      body: JSON.stringify({ ...next, mode: 'manual' })
    })
    expect(again.status).toBe(200)
  })

  it('prints with --json the raw response, which validates against openapi.yaml', async () => {
    const { code, stdout } = await cli(
      ['compact', '-', '--json', '--mode', 'manual', '--budget', '20000'],
      { COMPACTION_GATEWAY_URL: server.url, COMPACTION_GATEWAY_KEY: 'key-cli-000000000000' },
      readFileSync(fixture, 'utf8')
    )
    expect(code).toBe(0)
    const body = JSON.parse(stdout) as { compacted: boolean }
    expect(body.compacted).toBe(true)
    expect(responseValidator()('POST', '/v1/compact', 200, body)).toEqual([])
  })

  it('names the URL when the server cannot be reached, and exits 3', async () => {
    // a port that was free a moment ago: nothing listens there
    const probe = createServer().listen(0, '127.0.0.1')
    await once(probe, 'listening')
    const port = (probe.address() as AddressInfo).port
    await new Promise((r) => probe.close(r))
    const { code, stderr, stdout } = await cli(['compact', fixture, '--url', `http://127.0.0.1:${port}`])
    expect(code).toBe(3)
    expect(stdout).toBe('')
    expect(stderr).toContain(`cannot reach the service at http://127.0.0.1:${port}`)
    expect(stderr).toContain('ECONNREFUSED')
  })

  it("passes on the service's own error message, and exits 4", async () => {
    const bad = join(tempDb(), '..', 'bad.json')
    writeFileSync(
      bad,
      JSON.stringify({
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'bash', input: {} }] },
          { role: 'user', content: 'b' }
        ]
      })
    )
    const unauthorized = await cli(['compact', bad, '--url', server.url])
    expect(unauthorized.code).toBe(4)
    expect(unauthorized.stderr).toContain('401 authentication_error')
    const invalid = await cli(['compact', bad, '--url', server.url, '--key', 'key-cli-000000000000'])
    expect(invalid.code).toBe(4)
    expect(invalid.stderr).toContain('422 invalid_request_error: messages[1].content[0]')
    expect(invalid.stderr).toContain('(at /messages/1/content/0)')
  })

  it('exits 2 on a usage mistake, in one line', async () => {
    const { code, stderr } = await cli(['compact', fixture, '--mode', 'sometimes'])
    expect(code).toBe(2)
    expect(stderr).toContain('--mode is auto or manual')
    expect(stderr.trim().split('\n')).toHaveLength(1)
    expect((await cli(['frobnicate'])).code).toBe(2)
    expect((await cli(['compact', fixture, '--summarizer', 'gpt'])).stderr).toContain('--summarizer is auto, model, anthropic, openai, gemini or extractive')
  })

  it('names a missing file and exits 2, without the usage text', async () => {
    const { code, stderr } = await cli(['compact', 'no/such/history.json', '--url', server.url])
    expect(code).toBe(2)
    expect(stderr.trim()).toBe('compaction-gateway: no such file: no/such/history.json')
  })

  it('sends --keep-turns, --summarizer and --dry-run', async () => {
    const { code, stdout } = await cli([
      'compact',
      fixture,
      '--json',
      '--dry-run',
      '--keep-turns',
      '1',
      '--summarizer',
      'extractive',
      '--url',
      server.url,
      '--key',
      'key-cli-000000000000'
    ])
    expect(code).toBe(0)
    const body = JSON.parse(stdout) as { reason: string; compacted: boolean; kept_from: number }
    expect(body).toMatchObject({ reason: 'dry_run', compacted: false })
    expect(body.kept_from).toBeGreaterThan(0)
  })

  it('shows with --dry-run what the compaction would leave: the messages a summary would replace and the tail kept raw', async () => {
    const json = await cli(['compact', fixture, '--json', '--dry-run', '--url', server.url, '--key', 'key-cli-000000000000'])
    const body = JSON.parse(json.stdout) as { kept_from: number; stats: { kept_tokens: number } }
    const { code, stdout } = await cli(['compact', fixture, '--dry-run', '--url', server.url, '--key', 'key-cli-000000000000'])
    expect(code).toBe(0)
    expect(stdout).toContain(`dry run: a compaction would summarize messages 0–${body.kept_from - 1} (`)
    expect(stdout).toMatch(new RegExp(`^kept raw tokens\\s+${body.stats.kept_tokens.toLocaleString('en-US')}$`, 'm'))
    expect(stdout).toMatch(new RegExp(`^kept messages\\s+\\d+ \\(from index ${body.kept_from}\\)$`, 'm'))
    expect(stdout).not.toMatch(/^tokens after/m)
  })

  it('gives up after --timeout when the service accepts and never answers, and exits 3', async () => {
    const silent = createServer(() => undefined).listen(0, '127.0.0.1')
    await once(silent, 'listening')
    const port = (silent.address() as AddressInfo).port
    const { code, stderr } = await cli(['compact', fixture, '--url', `http://127.0.0.1:${port}`, '--timeout', '1'])
    silent.close()
    expect(code).toBe(3)
    expect(stderr).toContain('within 1 s (--timeout)')
  })
})

describe('compaction-gateway itself', () => {
  it('prints its version', async () => {
    const { code, stdout } = await cli(['--version'])
    expect(code).toBe(0)
    expect(stdout.trim()).toBe(`compaction-gateway ${(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version}`)
  })

  it("prints a command's own usage and options for its --help", async () => {
    const compact = await cli(['compact', '--help'])
    expect(compact.code).toBe(0)
    expect(compact.stdout).toContain('compaction-gateway compact FILE')
    expect(compact.stdout).toContain('--format FORMAT')
    expect(compact.stdout).toContain('--url URL')
    expect(compact.stdout).not.toContain('compaction-gateway recall')
    const sessions = await cli(['sessions', '-h'])
    expect(sessions.stdout).toContain('--cursor C')
    expect(sessions.stdout).not.toContain('--dry-run')
    // a word an object has by inheritance is no command: the general usage, not a function's text
    const inherited = await cli(['constructor', '--help'])
    expect(inherited.stdout).toContain('compaction-gateway COMMAND --help')
    expect(inherited.stdout).not.toContain('[native code]')
  })

  it("names an unknown option and the command, every quote closed, and points at the command's help", async () => {
    const { code, stderr } = await cli(['compact', fixture, '--frobnicate'])
    expect(code).toBe(2)
    expect(stderr.trim()).toBe('compaction-gateway: compact has no option --frobnicate (compaction-gateway compact --help for usage)')
  })

  it("points at --format when a history sent without it reads as another API's", async () => {
    const chat = join(tempDb().replace(/compaction\.db$/, ''), 'chat.json')
    writeFileSync(
      chat,
      JSON.stringify({
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'ls', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
          { role: 'user', content: 'go on' }
        ]
      })
    )
    const { code, stderr } = await cli(['compact', chat, '--url', server.url, '--key', 'key-cli-000000000000'])
    expect(code).toBe(4)
    expect(stderr).toContain('try --format openai-chat')
  })

  it('prints help for any command and does nothing else: serve --help starts no server', async () => {
    // (a server started instead would never exit: the test's timeout)
    const { code, stdout } = await cli(['serve', '--help'], { PORT: '0' })
    expect(code).toBe(0)
    expect(stdout).toContain('usage:')
    expect(stdout).not.toContain('Server listening')
  })
})

describe('compaction-gateway sessions', () => {
  it("lists the key's sessions, newest activity first, one line each", async () => {
    const key = 'key-cli-000000000000'
    for (const session of ['cli-sess-old', 'cli-sess-new']) {
      expect((await cli(['compact', fixture, '--url', server.url, '--key', key, '--session', session])).code).toBe(0)
    }
    const { code, stdout, stderr } = await cli(['sessions', '--url', server.url, '--key', key, '--limit', '2'])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    const lines = stdout.trim().split('\n')
    expect(lines[0]).toMatch(/^last compaction\s+compactions\s+tokens before\s+after\s+session$/)
    // local times to the second, numbers with thousands separators, every column where its header is
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+1\s+\d{1,3}(?:,\d{3})*\s+\d{1,3}(?:,\d{3})*\s+cli-sess-new$/)
    expect(lines[2]).toMatch(/cli-sess-old$/)
    const at = lines[0]!.indexOf('session')
    for (const line of lines.slice(1)) expect(line.indexOf('cli-sess-')).toBe(at)
    const numbersEnd = lines[0]!.indexOf('after') + 'after'.length
    for (const line of lines.slice(1)) expect(line.slice(0, numbersEnd)).toMatch(/\d$/)
  })

  it('reads the service where the environment puts it (PORT and HOST, as the service does), and says 1 compaction', async () => {
    const key = 'key-cli-000000000000'
    const port = new URL(server.url).port
    const { code, stdout } = await cli(['recap', 'cli-sess-new', '--key', key], { PORT: port, HOST: '0.0.0.0' })
    expect(code).toBe(0)
    expect(stdout).toMatch(/^1 compaction, the latest at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n/)
  })
})

describe('compaction-gateway show', () => {
  it('shows one compaction: when, tokens, the messages it removed, its cold layer and its summary', async () => {
    const key = 'key-cli-000000000000'
    const made = await cli(['compact', fixture, '--url', server.url, '--key', key, '--session', 'cli-show', '--json'])
    const id = (JSON.parse(made.stdout) as { summary: { id: string }; kept_from: number }).summary.id
    const keptFrom = (JSON.parse(made.stdout) as { kept_from: number }).kept_from
    const { code, stdout, stderr } = await cli(['show', 'cli-show', id, '--url', server.url, '--key', key])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    expect(stdout).toMatch(new RegExp(`^removed\\s+messages 0–${keptFrom - 1} \\(${keptFrom}\\)$`, 'm'))
    expect(stdout).toMatch(/^cold layer\s+\d+ \w+/m)
    expect(stdout).toContain(`<compaction-summary id="${id}"`)
    const missing = await cli(['show', 'cli-show', 'cmp_none', '--url', server.url, '--key', key])
    expect(missing.code).toBe(4)
  })
})

describe('compaction-gateway delete', () => {
  it('deletes a session after --yes (asking otherwise, and refusing where no one can answer); deleting again finds nothing', async () => {
    const key = 'key-cli-000000000000'
    expect((await cli(['compact', fixture, '--url', server.url, '--key', key, '--session', 'cli-del'])).code).toBe(0)
    const unasked = await cli(['delete', 'cli-del', '--url', server.url, '--key', key])
    expect(unasked.code).toBe(2)
    expect(unasked.stderr).toContain('pass --yes')
    const { code, stdout, stderr } = await cli(['delete', 'cli-del', '--yes', '--url', server.url, '--key', key])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    expect(stdout).toMatch(/^deleted session cli-del: 1 compaction, [1-9][\d,]* cold-layer entr(?:y|ies), 0 cached summaries and anchors$/m)
    expect((await cli(['sessions', '--url', server.url, '--key', key])).stdout).not.toContain('cli-del')
    expect(await cli(['delete', 'cli-del', '--yes', '--url', server.url, '--key', key])).toMatchObject({
      code: 0,
      stderr: '',
      stdout: 'nothing kept of session cli-del: nothing to delete\n'
    })
  })
})

describe('compaction-gateway compact --format', () => {
  it("compacts a Responses request body's input, and writes it back as one with --out", async () => {
    const dir = join(tempDb(), '..')
    const request = join(dir, 'codex.json')
    const input = [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
      { role: 'user', content: 'list the files' },
      { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{"command":["ls"]}' },
      { type: 'function_call_output', call_id: 'c1', output: 'a.ts' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'One file.' }] },
      { role: 'user', content: 'thanks' }
    ]
    writeFileSync(request, JSON.stringify({ model: 'gpt-5-codex', input, stream: true }))
    const out = join(dir, 'next.json')
    const { code, stderr } = await cli([
      'compact',
      request,
      '--format',
      'openai-responses',
      '--keep-turns',
      '1',
      '--out',
      out,
      '--url',
      server.url,
      '--key',
      'key-cli-000000000000'
    ])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    const next = JSON.parse(readFileSync(out, 'utf8')) as { input: Record<string, unknown>[] }
    expect(next.input[0]).toEqual(input[0])
    expect(next.input[1]).toMatchObject({ type: 'message', role: 'user' })
    expect(next.input.at(-1)).toEqual(input.at(-1))
    const wrong = await cli(['compact', request, '--format', 'mistral', '--url', server.url])
    expect([wrong.code, wrong.stderr]).toEqual([2, expect.stringContaining('--format is anthropic, openai-chat, openai-responses, gemini')])
  })
})
