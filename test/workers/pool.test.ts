import { afterAll, describe, expect, it } from 'vitest'
import { CompactionPool } from '../../src/workers/pool.js'
import { shellStep, user } from '../helpers/history.js'
import { clearedMemory } from '../../src/service/compact.js'
import type { ClearedUse } from '../../src/compaction/index.js'

const task = { defaults: { budgetTokens: 2_000, keepTurns: 4 }, keyName: '', coldLayer: false }
const history = { mode: 'manual', messages: [user('fix it'), ...Array.from({ length: 30 }, (_, i) => shellStep(`t${i}`, `make ${i}`, 'q'.repeat(500))).flat()] }
const pool = new CompactionPool(1)
afterAll(() => pool.close())

describe('CompactionPool', () => {
  it('compacts a body in a worker and hands back the serialized answer with what the main thread counts', async () => {
    const result = await pool.run(task, Buffer.from(JSON.stringify(history)))
    if (!result.ok) throw new Error(result.message)
    const answer = JSON.parse(Buffer.from(result.json).toString()) as { compacted: boolean; messages: unknown[] }
    expect(answer.compacted).toBe(true)
    expect(result.run.response.compacted).toBe(true)
    expect(result.as).toEqual({ mode: 'manual' })
  })

  it("redacts cleared tool results' whole outputs for the cold layer in a worker, as they are redacted here", async () => {
    const uses: ClearedUse[] = [0, 1].map((i) => ({
      message: 2 + 2 * i,
      block: 0,
      callMessage: 1 + 2 * i,
      tool_use_id: `toolu_${i}`,
      name: 'bash',
      tokens: 5_000,
      inputCleared: false,
      evidence: `$ cat .env\nAPI_TOKEN=tok_${'a1b2c3'.repeat(6)}\n${'build step ok\n'.repeat(2_000)}src/app.ts:42: error: x is undefined`
    }))
    const here = clearedMemory(uses)
    expect(JSON.stringify(here)).not.toContain('a1b2c3a1b2c3')
    expect(await pool.clearedMemory(uses)).toEqual(here)
  })

  it('moves a body that owns its memory to the worker, and copies one that shares a pool', async () => {
    const owned = Buffer.from(new Uint8Array(Buffer.from(JSON.stringify(history))).buffer)
    await pool.run(task, owned)
    expect(owned.buffer.byteLength).toBe(0) // transferred: this thread's view is detached
    const shared = Buffer.from('{"messages":[{"role":"user","content":"hi"}]}') // small: from Node's shared pool
    expect(shared.byteLength).toBeLessThan(shared.buffer.byteLength)
    await pool.run(task, shared)
    expect(shared.toString()).toBe('{"messages":[{"role":"user","content":"hi"}]}')
  })

  it('answers a body it cannot parse with a 400 in the error’s shape, not a crash', async () => {
    const result = await pool.run(task, Buffer.from('{"messages": ['))
    expect(result).toMatchObject({ ok: false, kind: 'invalid_request', message: expect.stringContaining('not valid JSON') })
  })
})
