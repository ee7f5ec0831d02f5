/**
 * Histories shaped to find work that is not linear: one assistant message with N parallel tool calls
 * (each reading its own file), and a ledger of N files modified. Used by `npm run bench`.
 */
import type { Message } from '../src/compaction/index.js'

/** A prompt, one step of `n` parallel reads (each answered), a closing answer and a last prompt. */
export function parallelCalls(n: number): Message[] {
  const calls = Array.from({ length: n }, (_, i) => ({
    type: 'tool_use',
    id: `toolu_${i}`,
    name: 'Read',
    input: { file_path: `src/module_${i}/file_${i}.py` }
  }))
  const results = calls.map((c, i) => ({ type: 'tool_result', tool_use_id: c.id, content: `line 1 of file ${i}\nline 2 of file ${i}` }))
  return [
    { role: 'user', content: 'read every module and tell me which ones import the old client' },
    { role: 'assistant', content: calls },
    { role: 'user', content: results },
    { role: 'assistant', content: 'done reading' },
    { role: 'user', content: 'now summarize' }
  ]
}

/** `n` files modified, by shell edits spread over steps of 100 commands each. */
export function manyFiles(n: number): Message[] {
  const out: Message[] = [{ role: 'user', content: 'rename the logger in every file' }]
  for (let s = 0; s * 100 < n; s++) {
    const calls = Array.from({ length: Math.min(100, n - s * 100) }, (_, k) => {
      const i = s * 100 + k
      return { type: 'tool_use', id: `toolu_${i}`, name: 'bash', input: { command: `sed -i 's/log/logger/' pkg/sub_${i % 97}/file_${i}.py` } }
    })
    out.push({ role: 'assistant', content: calls })
    out.push({ role: 'user', content: calls.map((c) => ({ type: 'tool_result', tool_use_id: c.id, content: '' })) })
  }
  out.push({ role: 'assistant', content: 'all renamed' }, { role: 'user', content: 'thanks' })
  return out
}
