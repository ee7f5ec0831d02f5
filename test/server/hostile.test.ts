import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/server/app.js'
import { testApp } from '../helpers/app.js'
import { assistant, call, result, results, user } from '../helpers/history.js'

let app: App
beforeAll(async () => {
  app = await testApp({ COMPACT_RATE_LIMIT_PER_MIN: '1000000' })
})
afterAll(async () => {
  await app.close()
})

function post(payload: string | object) {
  return app.inject({
    method: 'POST',
    url: '/v1/compact',
    headers: { 'content-type': 'application/json' },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload)
  })
}

/** The value a JSON pointer names in a body, or a sentinel when it names nothing. */
const MISSING = Symbol('missing')
function resolve(body: unknown, pointer: string): unknown {
  if (pointer === '/') return body
  let node: unknown = body
  const keys = pointer.split('/').slice(1)
  for (const [k, raw] of keys.entries()) {
    // inside a placeholder for deep nesting: the rest of the path must be a walk down its arrays
    const placeholder = typeof node === 'string' ? /^__deep_(\d+)__$/.exec(node) : null
    if (placeholder) return keys.slice(k).every((key) => key === '0') && keys.length - k <= Number(placeholder[1]) ? node : MISSING
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    if (typeof node !== 'object' || node === null || !Object.prototype.hasOwnProperty.call(node, key)) return MISSING
    node = (node as Record<string, unknown>)[key]
  }
  return node
}

/**
 * Arrays nested `depth` deep, as JSON text: a value that deep cannot go through JSON.stringify (the test's
 * own would overflow), so bodies carry a placeholder string that is swapped for the text at the end.
 */
const deep = (depth: number): string => `__deep_${depth}__`
const expand = (text: string): string => text.replace(/"__deep_(\d+)__"/g, (_m, d: string) => `${'['.repeat(Number(d))}1${']'.repeat(Number(d))}`)

const base = () => ({
  mode: 'manual',
  messages: [
    user('fix the failing test'),
    assistant('looking', call('a', 'bash', { command: 'pytest -x', env: { CI: '1' } })),
    results(result('a', [{ type: 'text', text: 'FAILED test_x.py::test_y - AssertionError' }], true)),
    assistant('found it'),
    user('go on')
  ]
})

/** Every place in a body, as a list of keys. */
function places(value: unknown, keys: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(keys)
  if (Array.isArray(value)) value.forEach((v, i) => places(v, [...keys, i], out))
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) places(v, [...keys, k], out)
  return out
}

const junk = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    0,
    -1,
    1.5,
    true,
    '',
    'x',
    'OFF',
    [],
    {},
    [null],
    [1],
    [{}],
    { type: 5 },
    { type: 'text' },
    { type: 'text', text: 7 },
    { type: '' }
  ),
  fc.constantFrom<unknown>({ type: 'tool_result' }, { type: 'tool_use', id: 'z', name: 'n' }, { type: 'image' }, [
    { type: 'tool_result', tool_use_id: 'a', content: [null] }
  ]),
  // nesting around the limit (128 deep, wherever the value lands), now and then far past it
  fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 60, max: 300 }) }, { weight: 1, arbitrary: fc.integer({ min: 300, max: 20_000 }) }).map(deep),
  fc.jsonValue({ maxDepth: 3 })
)

describe('hostile bodies', () => {
  it('never answer 5xx: 10,000 generated malformed bodies get 200 or a 4xx in the one error shape, naming a place in the body', async () => {
    const template = base()
    const all = places(template).filter((p) => p.length > 0)
    const mutation = fc.record({
      place: fc.integer({ min: 0, max: all.length - 1 }),
      op: fc.constantFrom('replace', 'delete', 'add'),
      value: junk,
      name: fc.constantFrom('type', 'text', 'content', 'role', 'input', 'extra', 'messages', '__proto__', 'constructor')
    })
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const root: unknown = structuredClone(template)
        for (const m of mutations) {
          const keys = all[m.place]!
          const parentKeys = keys.slice(0, -1)
          const parent = parentKeys.reduce<unknown>((n, k) => (n && typeof n === 'object' ? (n as Record<string | number, unknown>)[k] : undefined), root)
          if (!parent || typeof parent !== 'object') continue
          const last = keys[keys.length - 1]!
          const container = parent as Record<string | number, unknown>
          const value: unknown = structuredClone(m.value) // constants are shared between runs
          if (m.op === 'replace') container[last] = value
          else if (m.op === 'delete') {
            if (Array.isArray(container)) container.splice(Number(last), 1)
            else delete container[last]
          } else if (!Array.isArray(container)) container[String(m.name)] = value
          else container.push(value)
        }
        const text = expand(JSON.stringify(root))
        const res = await post(text)
        expect(res.statusCode, text.slice(0, 300)).toBeLessThan(500)
        if (res.statusCode === 200) return
        const answer = res.json()
        expect(answer).toEqual({
          type: 'error',
          error: { type: expect.any(String), message: expect.any(String), ...(answer.error.path !== undefined ? { path: expect.any(String) } : {}) }
        })
        if (answer.error.path !== undefined)
          expect(resolve(JSON.parse(JSON.stringify(root)), answer.error.path), `${answer.error.path} in ${text.slice(0, 300)}`).not.toBe(MISSING)
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 10_000) }
    )
  }, 120_000)

  it.each([
    [
      'a tool_result whose content is [null]',
      [
        user('x'),
        assistant(call('a', 'bash', { command: 'ls' })),
        results({ type: 'tool_result', tool_use_id: 'a', content: [null] } as never),
        assistant('ok'),
        user('y')
      ],
      '/messages/2/content/0/content/0'
    ],
    ['content [1]', [{ role: 'user', content: [1] }], '/messages/0/content/0'],
    ['content [{}]', [{ role: 'user', content: [{}] }], '/messages/0/content/0'],
    ['a text block without text', [{ role: 'user', content: [{ type: 'text' }] }], '/messages/0/content/0'],
    ['text that is a number', [{ role: 'user', content: [{ type: 'text', text: 5 }] }], '/messages/0/content/0'],
    [
      'a nested text part that is a number',
      [user('x'), assistant(call('a', 'bash', { command: 'ls' })), results(result('a', [{ type: 'text', text: 5 } as never])), assistant('ok'), user('y')],
      '/messages/2/content/0/content/0'
    ],
    [
      'a tool_use input that is not an object',
      [user('x'), { role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'bash', input: 'ls' }] }],
      '/messages/1/content/0'
    ]
  ])('400 for %s, at the block', async (_name, messages, path) => {
    const res = await post({ mode: 'manual', messages })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.path).toBe(path)
  })

  it('names the allowed block types when a block has no type', async () => {
    const res = await post({ messages: [{ role: 'user', content: [{ text: 'hi' }] }] })
    expect(res.statusCode).toBe(400)
    expect(res.json().error).toEqual({
      type: 'invalid_request_error',
      path: '/messages/0/content/0',
      message: expect.stringMatching(/^body\.messages\[0\]\.content\[0\] has no `type`: a block is an object whose `type` is one of text, image, .*tool_result/)
    })
  })

  it('refuses nesting past the limit before anything walks it: a tool input 20,000 arrays deep, and an extra field as deep on a kept block', async () => {
    const deepInput = await post(
      expand(
        JSON.stringify({
          mode: 'manual',
          messages: [user('x'), assistant(call('a', 'bash', { command: 'ls', deep: deep(20_000) })), results(result('a', 'ok')), assistant('ok'), user('y')]
        })
      )
    )
    expect(deepInput.statusCode).toBe(400)
    expect(deepInput.json().error.message).toContain('nests deeper than 128 levels')
    expect(deepInput.json().error.path).toMatch(/^\/messages\/1\/content\/0\/input\/deep(\/0)+$/)
    const deepExtra = await post(
      expand(
        JSON.stringify({
          mode: 'manual',
          messages: [user('x'), assistant('ok'), { role: 'user', content: [{ type: 'text', text: 'y', extra: deep(20_000) }] }]
        })
      )
    )
    expect(deepExtra.statusCode).toBe(400)
    expect(deepExtra.json().error.path).toMatch(/^\/messages\/2\/content\/0\/extra(\/0)+$/)
  })

  it('refuses a prototype key however it is escaped', async () => {
    const res = await post('{"messages":[{"role":"user","content":"x"}],"\\u005f_proto__":{"polluted":true}}')
    expect(res.statusCode).toBe(400)
    expect(res.json().error.path).toBe('/__proto__')
    const ctor = await post('{"messages":[{"role":"user","content":"x","constructor":{"prototype":{"polluted":true}}}]}')
    expect(ctor.statusCode).toBe(400)
    expect(ctor.json().error.path).toBe('/messages/0/constructor')
  })

  it('names "off" when budget_tokens is neither an integer nor "off"', async () => {
    const res = await post({ messages: [user('x')], budget_tokens: 'OFF' })
    expect(res.statusCode).toBe(400)
    expect(res.json().error).toMatchObject({ path: '/budget_tokens', message: 'body.budget_tokens must be an integer or "off"' })
    const small = await post({ messages: [user('x')], budget_tokens: 10 })
    expect(small.json().error.message).toBe('body.budget_tokens must be at least 1000 or "off"')
  })
})
