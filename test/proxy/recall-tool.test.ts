import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Message, PROXY_RECALL_TOOL } from '../../src/compaction/index.js'
import {
  RECALL_TOOL_DEFINITION,
  type RecallExchange,
  StreamRound,
  closingEvents,
  eventText,
  parseEvents,
  restoreExchanges,
  visibleFingerprint,
  withRecallToolBytes
} from '../../src/proxy/recall-tool.js'

type Block = Record<string, unknown>

/** A block as the API streams it: its start, its deltas, its stop. */
function blockEvents(block: Block, index: number): string[] {
  const start = (content_block: Block): string => eventText({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block } })
  const delta = (d: Block): string => eventText({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: d } })
  const stop = eventText({ event: 'content_block_stop', data: { type: 'content_block_stop', index } })
  if (block.type === 'text') {
    const text = String(block.text)
    const half = Math.floor(text.length / 2)
    return [
      start({ type: 'text', text: '' }),
      delta({ type: 'text_delta', text: text.slice(0, half) }),
      delta({ type: 'text_delta', text: text.slice(half) }),
      stop
    ]
  }
  if (block.type === 'thinking')
    return [
      start({ type: 'thinking', thinking: '' }),
      delta({ type: 'thinking_delta', thinking: block.thinking }),
      delta({ type: 'signature_delta', signature: block.signature }),
      stop
    ]
  const json = JSON.stringify(block.input)
  return [
    start({ ...block, input: {} }),
    delta({ type: 'input_json_delta', partial_json: json.slice(0, 3) }),
    delta({ type: 'input_json_delta', partial_json: json.slice(3) }),
    stop
  ]
}

const block: fc.Arbitrary<Block> = fc.oneof(
  fc.record({ type: fc.constant('text'), text: fc.string({ minLength: 1, maxLength: 30 }) }),
  fc.record({ type: fc.constant('thinking'), thinking: fc.string({ maxLength: 30 }), signature: fc.base64String({ minLength: 4, maxLength: 40 }) }),
  fc.record({
    type: fc.constant('tool_use'),
    id: fc.uuid().map((u) => `toolu_${u}`),
    name: fc.constantFrom('bash', 'read', PROXY_RECALL_TOOL),
    input: fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })
  })
)

/** What a client reads of a stream: the blocks by index, checked as the SDK checks them (each delta of a started block, indices in order). */
function clientRead(text: string): { blocks: Block[]; starts: number; stops: number; closings: number } {
  const blocks: Block[] = []
  let starts = 0
  let stops = 0
  let closings = 0
  for (const { event } of parseEvents(text)) {
    const d = event!.data
    if (d.type === 'content_block_start') {
      expect(d.index).toBe(blocks.length)
      blocks.push(structuredClone(d.content_block as Block))
      starts++
    } else if (d.type === 'content_block_delta') {
      const b = blocks[Number(d.index)]
      expect(b).toBeDefined()
      const delta = d.delta as Block
      if (delta.type === 'text_delta') b!.text = `${String(b!.text)}${String(delta.text)}`
      if (delta.type === 'thinking_delta') b!.thinking = `${String(b!.thinking)}${String(delta.thinking)}`
      if (delta.type === 'signature_delta') b!.signature = delta.signature
      if (delta.type === 'input_json_delta') b!.partial = `${String(b!.partial ?? '')}${String(delta.partial_json)}`
    } else if (d.type === 'content_block_stop') {
      const b = blocks[Number(d.index)]!
      if (b.partial !== undefined) {
        b.input = JSON.parse(String(b.partial))
        delete b.partial
      }
      stops++
    } else if (d.type === 'message_delta' || d.type === 'message_stop') closings++
  }
  return { blocks, starts, stops, closings }
}

describe('the recall tool in a Messages stream', () => {
  it('passes every block but the recall calls on, renumbered from where the client is, and holds the close; the round holds every block whole', () => {
    fc.assert(
      fc.property(fc.array(block, { maxLength: 8 }), fc.nat({ max: 4 }), (generated, offset) => {
        // (as JSON carries it: a -0 is 0 once written)
        const content = JSON.parse(JSON.stringify(generated)) as Block[]
        const upstream = [
          eventText({
            event: 'message_start',
            data: { type: 'message_start', message: { id: 'm', content: [], usage: { input_tokens: 10, output_tokens: 1 } } }
          }),
          ...content.flatMap((b, i) => blockEvents(b, i)),
          eventText({ event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 7 } } }),
          eventText({ event: 'message_stop', data: { type: 'message_stop' } })
        ].join('')
        const round = new StreamRound(offset === 0, offset)
        const out = parseEvents(upstream)
          .flatMap(({ event, raw }) => round.take(event, raw))
          .join('')
        // the client's part: the blocks that are not recall calls, numbered on from the offset
        const visible = content.filter((b) => b.name !== PROXY_RECALL_TOOL)
        const padded = Array.from({ length: offset }, (_, i) =>
          eventText({ event: 'content_block_start', data: { type: 'content_block_start', index: i, content_block: { type: 'text', text: '' } } })
        ).join('')
        const read = clientRead(padded + out)
        expect(read.blocks.slice(offset)).toEqual(visible)
        expect(read.closings).toBe(0)
        expect(out.includes(PROXY_RECALL_TOOL)).toBe(false)
        expect(out.includes('message_start')).toBe(offset === 0)
        // the round: every block whole, for the continuation
        expect(round.content()).toEqual(content)
        expect(round.stopReason()).toBe('tool_use')
        expect(round.usage()).toEqual({ input_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 7 })
        expect(round.clientBlocks).toBe(offset + visible.length)
        // the close it holds, given with the turn's usage
        const close = parseEvents(closingEvents(round.closing, round.usage(), 'end_turn')).map((e) => e.event!.data)
        expect(close.map((d) => d.type)).toEqual(['message_delta', 'message_stop'])
        expect(close[0]).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } })
      }),
      { numRuns: 200 }
    )
  })
})

describe("a turn's exchange on the next request", () => {
  const recall = { type: 'tool_use', id: 'toolu_r', name: PROXY_RECALL_TOOL, input: { query: 'x' } }
  const result = { type: 'tool_result', tool_use_id: 'toolu_r', content: 'found' }

  it('stands where the client sends back the answer it got (whatever its key order and cache marks), the results it left opening the next message', () => {
    const answer = [
      { type: 'text', text: 'Looking.' },
      { type: 'tool_use', id: 'toolu_c', name: 'bash', input: { command: 'ls' } }
    ]
    const exchange: RecallExchange = {
      at: 1,
      visible: visibleFingerprint(answer),
      rounds: [{ role: 'assistant', content: [answer[0]!, answer[1]!, recall] as Message['content'] }],
      pending: [result]
    }
    const sentBack = [
      { cache_control: { type: 'ephemeral' }, text: 'Looking.', type: 'text' },
      { input: { command: 'ls' }, name: 'bash', id: 'toolu_c', type: 'tool_use' }
    ]
    const messages: Message[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: sentBack as Message['content'] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_c', content: 'a.ts' }] }
    ]
    const { messages: out, restored } = restoreExchanges(messages, [exchange])
    expect(restored).toBe(1)
    expect(out).toEqual([
      messages[0],
      exchange.rounds[0],
      { role: 'user', content: [result, { type: 'tool_result', tool_use_id: 'toolu_c', content: 'a.ts' }] }
    ])
    // an answer it does not stand for, as it came
    const other: Message[] = [messages[0]!, { role: 'assistant', content: [{ type: 'text', text: 'Something else.' }] }]
    expect(restoreExchanges(other, [exchange]).messages).toEqual(other)
  })

  it('puts back rounds whole: the answer becomes the rounds the upstream saw', () => {
    const final = { type: 'text', text: 'Found it.' }
    const exchange: RecallExchange = {
      at: 1,
      visible: visibleFingerprint([{ type: 'text', text: 'Looking.' }, final]),
      rounds: [
        { role: 'assistant', content: [{ type: 'text', text: 'Looking.' }, recall] as Message['content'] },
        { role: 'user', content: [result] as Message['content'] },
        { role: 'assistant', content: [final] as Message['content'] }
      ],
      pending: []
    }
    const messages: Message[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'text', text: 'Looking.' }, final] as Message['content'] },
      { role: 'user', content: 'next' }
    ]
    expect(restoreExchanges(messages, [exchange]).messages).toEqual([messages[0], ...exchange.rounds, messages[2]])
    // the same answer at another place (a later turn that said the same) is another answer
    const later: Message[] = [...messages, { role: 'assistant', content: [{ type: 'text', text: 'Looking.' }, final] as Message['content'] }]
    expect(restoreExchanges(later, [exchange]).messages.at(-1)).toEqual(later.at(-1))
    expect(restoreExchanges(later, [exchange]).restored).toBe(1)
  })
})

describe('the recall tool in a request', () => {
  it('goes after the client’s tools, every other byte of the body as it came', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string({ minLength: 1, maxLength: 6 }).filter((k) => k !== 'tools' && k !== '__proto__'),
          fc.jsonValue({ maxDepth: 2 }),
          { maxKeys: 4 }
        ),
        fc.option(fc.array(fc.record({ name: fc.constantFrom('bash', 'read'), input_schema: fc.constant({ type: 'object' }) }), { maxLength: 3 })),
        fc.constantFrom('', ' ', '\n  '),
        (fields, tools, space) => {
          const body = tools === null ? fields : { ...fields, tools }
          const bytes = Buffer.from(JSON.stringify(body, null, space === '' ? undefined : space))
          const out = withRecallToolBytes(bytes)
          const parsed = JSON.parse(out.toString('utf8')) as Record<string, unknown>
          expect(parsed).toEqual(JSON.parse(JSON.stringify({ ...body, tools: [...(tools ?? []), RECALL_TOOL_DEFINITION] })))
          // the bytes before the insertion are the body's own
          const insertedAt = out.indexOf(Buffer.from(`"${PROXY_RECALL_TOOL}"`))
          const before = out
            .subarray(0, insertedAt - '{"name":'.length)
            .toString('utf8')
            .replace(/,?"tools":\[$|,?$/, '')
          expect(bytes.toString('utf8').startsWith(before.replace(/,$/, ''))).toBe(true)
        }
      ),
      { numRuns: 200 }
    )
  })
})
