/** Examples for the OpenAPI document; a test checks each one against its schema. */

export const compactRequestExample = {
  mode: 'auto',
  budget_tokens: 45_000,
  session_id: 'sess-7f3a',
  recall_hint: 'search older turns with `session search <query>`',
  usage: { input_tokens: 51_204 },
  messages: [
    { role: 'user', content: 'The login test fails; please fix src/auth/login.ts.' },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Running the test first.' },
        { type: 'tool_use', id: 'toolu_01', name: 'bash', input: { command: 'npm test -- login' } }
      ]
    },
    {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'FAIL test/login.test.ts\n  TypeError: session is undefined', is_error: true }]
    },
    { role: 'assistant', content: [{ type: 'text', text: 'The session is not created before login; fixing that.' }] },
    { role: 'user', content: 'Go ahead, and keep the public API unchanged.' }
  ]
}

const summaryText = [
  '<compaction-summary id="cmp_5d1e0c2b9a7f4e3d8c6b1a0f9e8d7c6b" version="1" compacted_turns="1">',
  '## Objective',
  'Fix the failing login test in src/auth/login.ts.',
  '## User requests (verbatim, newest last)',
  '- The login test fails; please fix src/auth/login.ts.',
  '## Failing tests and errors',
  '- bash `npm test -- login` failed: FAIL test/login.test.ts | TypeError: session is undefined',
  '</compaction-summary>'
].join('\n')

export const compactResponseExample = {
  compacted: true,
  reason: 'over_budget',
  kept_from: 3,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: summaryText },
        {
          type: 'text',
          text: '[compaction-gateway note] Earlier turns of this conversation were compacted: their facts are in the summary above, and the messages after it are the most recent turns, kept as they were. To search the raw older turns: search older turns with `session search <query>`'
        }
      ]
    },
    { role: 'assistant', content: [{ type: 'text', text: 'The session is not created before login; fixing that.' }] },
    { role: 'user', content: 'Go ahead, and keep the public API unchanged.' }
  ],
  summary: {
    id: 'cmp_5d1e0c2b9a7f4e3d8c6b1a0f9e8d7c6b',
    text: summaryText,
    sections: {
      objective: 'Fix the failing login test in src/auth/login.ts.',
      user_requests: ['The login test fails; please fix src/auth/login.ts.'],
      current_plan: [],
      files_modified: [],
      files_inspected: [],
      key_decisions: [],
      rejected_approaches: [],
      constraints: [],
      failing_tests_and_errors: ['bash `npm test -- login` failed: FAIL test/login.test.ts | TypeError: session is undefined'],
      open_questions: [],
      user_preferences: [],
      next_steps: []
    }
  },
  clips: [],
  stats: {
    raw_history_tokens: 51_204,
    summary_tokens: 212,
    compacted_turns: 1,
    compacted_messages: 3,
    kept_messages: 2,
    kept_tokens: 31,
    context_after_compaction: 243,
    clipped_tool_results: 0,
    guard_added: 0,
    estimate_scale: 1,
    carried_context_tokens: 0,
    carried_context_dropped: 0
  },
  summarizer: { kind: 'extractive', model: null, input_tokens: 0, output_tokens: 0, calls: 0, fallback_reason: null, duration_ms: 1 },
  doctrine_version: '2026-11-30.1'
}

export const errorExample = {
  type: 'error',
  error: {
    type: 'invalid_request_error',
    message: 'messages[1].content[1]: tool_use "toolu_01" is not answered by a tool_result in messages[2]',
    path: '/messages/1/content/1'
  }
}
