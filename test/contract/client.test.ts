import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import openapiTS, { astToString } from 'openapi-typescript'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { ROOT } from '../helpers/process.js'

/**
 * A client generated from openapi.yaml (openapi-typescript, called through openapi-fetch) type-checks
 * calls to every operation, with their bodies, parameters and answers; and a call that breaks the
 * contract does not. The files go under node_modules/.cache so that the project's own build never sees them.
 */
const DIR = join(ROOT, 'node_modules/.cache/contract-client')

const CALLS = `import createClient from 'openapi-fetch'
import type { paths } from './api.js'

const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:8080', headers: { authorization: 'Bearer KEY' } })

export async function everyOperation(): Promise<void> {
  const compacted = await client.POST('/v1/compact', { body: { messages: [{ role: 'user', content: 'hi' }], mode: 'manual', budget_tokens: 'off', session_id: 's' } })
  if (compacted.data) {
    const kept: number = compacted.data.kept_from
    const reason: 'over_budget' | 'under_budget' | 'manual' | 'disabled' | 'nothing_to_compact' | 'dry_run' | 'cleared' | 'cache_lapsed' = compacted.data.reason
    for (const c of compacted.data.cleared ?? []) void [c.tool_use_id, c.tokens]
    void kept
    void reason
  }
  if (compacted.error) void compacted.error.error.message
  const page = await client.GET('/v1/sessions/{session_id}/compactions', { params: { path: { session_id: 's' }, query: { limit: 20 } } })
  if (page.data) void page.data.next_cursor
  const found = await client.POST('/v1/sessions/{session_id}/recall', { params: { path: { session_id: 's' } }, body: { query: 'an error', limit: 5, kinds: ['error'] } })
  if (found.data) for (const r of found.data.results) void [r.kind, r.messages[0], r.score]
  const recap = await client.GET('/v1/sessions/{session_id}/recap', { params: { path: { session_id: 's' } } })
  if (recap.data) void recap.data.compactions
  const tool = await client.GET('/v1/tools/recall')
  if (tool.data) void tool.data.input_schema
  const doctrine = await client.GET('/v1/doctrine')
  if (doctrine.data) void doctrine.data.sha256
  const message = await client.POST('/v1/messages', { body: { model: 'claude-x', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], stream: false }, params: { header: { 'x-compaction-budget': '120000' } } })
  if (message.error) void message.error.error.type
  const counted = await client.POST('/v1/messages/count_tokens', { body: { model: 'claude-x', messages: [{ role: 'user', content: [{ type: 'text' }] }] } })
  void counted.response.status
  const chat = await client.POST('/v1/chat/completions', { body: { model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }], stream: true }, params: { header: { 'x-compaction-session': 's-1' } } })
  if (chat.error) void chat.error.error.message
  const responded = await client.POST('/v1/responses', { body: { model: 'gpt-x', input: [{ type: 'message', role: 'user', content: 'hi' }], previous_response_id: 'resp_1' } })
  void responded.response.status
  const remote = await client.POST('/v1/responses/compact', { body: { model: 'gpt-x', input: [{ type: 'message', role: 'user', content: 'hi' }] }, params: { header: { 'x-compaction-budget': '120000' } } })
  void remote.response.status
  await client.GET('/v1/models', { params: { header: { 'anthropic-version': '2023-06-01' } } })
  await client.GET('/v1/models/{model}', { params: { path: { model: 'gpt-x' } } })
  await client.GET('/healthz')
  await client.GET('/readyz')
  await client.GET('/metrics')
  await client.GET('/')
  await client.GET('/v1/sessions', { params: { query: { limit: 5 } } })
  await client.GET('/v1/sessions/{session_id}/compactions/{compaction_id}', { params: { path: { session_id: 's', compaction_id: 'cmp_1' } } })
  const entries = await client.GET('/v1/sessions/{session_id}/compactions/{compaction_id}/entries', { params: { path: { session_id: 's', compaction_id: 'cmp_1' }, query: { limit: 50 } } })
  if (entries.data) void [entries.data.next_cursor, entries.data.entries.map((e) => [e.kind, e.text, e.messages[0]])]
  await client.GET('/openapi.yaml')
  await client.GET('/ui')
  await client.GET('/ui/{file}', { params: { path: { file: 'app.js' } } })
  const gone = await client.DELETE('/v1/sessions/{session_id}', { params: { path: { session_id: 's' } } })
  const loose = await client.DELETE('/v1/compactions/{compaction_id}', { params: { path: { compaction_id: 'cmp_1' } } })
  const mcp = await client.POST('/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })
  const mcpStream = await client.GET('/mcp')
  const mcpEnd = await client.DELETE('/mcp')
  if (loose.data) void [loose.data.compaction_id, loose.data.deleted]
  void [mcp.response.status, mcpStream.response.status, mcpEnd.response.status]
  if (gone.data) void [gone.data.deleted.compactions, gone.data.space_reclaimed]
  const timeline = await client.GET('/v1/sessions/{session_id}/timeline', { params: { path: { session_id: 's' }, query: { limit: 1000 } } })
  if (timeline.data) for (const p of timeline.data.points) void [p.raw_history_tokens, p.context_after_compaction, p.budget_tokens]
  const cost = await client.GET('/v1/sessions/{session_id}/cost', { params: { path: { session_id: 's' } } })
  if (cost.data) void [cost.data.requests, cost.data.upstream.cache_read_input_tokens, cost.data.tokens_kept_out, cost.data.estimate.saved_share]
  const gemini = await client.POST('/v1beta/models/{model}', { params: { path: { model: 'gemini-2.5-pro:generateContent' } }, body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] } })
  void gemini.response.status
  await client.GET('/v1beta/models')
  await client.GET('/v1beta/models/{model}', { params: { path: { model: 'gemini-2.5-pro' } } })
  const overview = await client.GET('/v1/overview', { params: { query: { from: '2026-12-01T00:00:00Z', session_id: 's' } } })
  if (overview.data) void [overview.data.bucket, overview.data.compactions.tokens_removed, overview.data.summaries.fallback_reasons, overview.data.crossings.waits[0]?.up_to_ms, overview.data.savings.saved, overview.data.series[0]?.at]
}
`

function typecheck(files: string[]): { ok: boolean; output: string } {
  try {
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'node_modules/typescript/bin/tsc'),
        '--noEmit',
        '--strict',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'es2022',
        '--skipLibCheck',
        ...files
      ],
      { cwd: DIR, stdio: 'pipe' }
    )
    return { ok: true, output: '' }
  } catch (err) {
    return { ok: false, output: String((err as { stdout?: Buffer }).stdout ?? err) }
  }
}

describe('a client generated from openapi.yaml', () => {
  it('type-checks a call to every operation, and refuses one that breaks the contract', async () => {
    mkdirSync(DIR, { recursive: true })
    const spec = parse(readFileSync(join(ROOT, 'openapi.yaml'), 'utf8')) as { paths: Record<string, Record<string, { operationId?: string }>> }
    const operations = Object.entries(spec.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ path, method, id: op.operationId }))
    )
    expect(operations.every((o) => typeof o.id === 'string')).toBe(true)
    for (const o of operations) expect(CALLS).toContain(`client.${o.method.toUpperCase()}('${o.path}'`)

    writeFileSync(join(DIR, 'api.ts'), astToString(await openapiTS(new URL(`file://${join(ROOT, 'openapi.yaml')}`))))
    writeFileSync(join(DIR, 'package.json'), '{"type":"module"}\n')
    writeFileSync(join(DIR, 'calls.ts'), CALLS)
    const good = typecheck(['calls.ts'])
    expect(good.output).toBe('')
    expect(good.ok).toBe(true)

    // a limit that is not an integer, and a body without messages: the generated types say no
    writeFileSync(
      join(DIR, 'wrong.ts'),
      `${CALLS}\nexport const wrong = [client.GET('/v1/sessions/{session_id}/compactions', { params: { path: { session_id: 's' }, query: { limit: 'twenty' } } }), client.POST('/v1/compact', { body: { mode: 'manual' } })]\n`
    )
    const bad = typecheck(['wrong.ts'])
    expect(bad.ok).toBe(false)
    expect(bad.output).toMatch(/wrong\.ts\(\d+,\d+\): error TS/)
  }, 60_000)
})
