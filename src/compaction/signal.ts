import { sliceHead, sliceTail } from './clip.js'
/**
 * Lines of tool output that carry signal: errors, tracebacks, failing tests, assertion messages and
 * exit codes. They survive every clip, so the summarizer sees why a command failed.
 */
const SIGNAL_LINE =
  /\b(?:error|errors|exception|traceback|failed|failure|fatal|panic|assert\w*|segmentation fault|exit (?:code|status)|returncode|denied|not found|undefined|cannot|unable to|warning)\b|^\s*File "[^"]+", line \d+|^E\s{2,}|^(?:FAIL|FAILED|ERROR|PASSED|ok|not ok)\b|<returncode>|\b\d+ (?:passed|failed|errors?)\b|npm ERR!|^\s*at .+:\d+:\d+\)?$/i

/** Exception class names: ValueError, KeyError, NullPointerException, AssertionError. */
const EXCEPTION_NAME = /[a-z0-9](?:Error|Exception|Failure)\b/

/** A signal line as kept: its first 300 characters. */
export function shortLine(line: string): string {
  return line.length > 300 ? `${sliceHead(line, 300)}…` : line
}

export function isSignalLine(line: string): boolean {
  return line.length > 0 && (SIGNAL_LINE.test(line) || EXCEPTION_NAME.test(line))
}

export function signalLines(text: string, limit: number): string[] {
  const out: string[] = []
  for (const line of text.split('\n')) {
    if (isSignalLine(line)) {
      out.push(shortLine(line))
      if (out.length >= limit) break
    }
  }
  return out
}

// Made once: a regular expression literal in a function is a new object at every call, and this runs once
// a tool call (50,000 of them in one step make megabytes of them). None is global or sticky: exec keeps no state.
const RETURN_CODE = /<returncode>\s*(-?\d+)\s*<\/returncode>/
const COMMAND_FINISHED = /\[Command finished with exit code (-?\d+)\]/
const EXIT_CODE = /\b[Ee]xit (?:code|status)[:= ]\s*(-?\d+)/

/** The exit code a tool output reports, in the shapes the agents of the corpus use. */
export function exitCodeOf(output: string): number | undefined {
  // Agents report the code at the start (mini-swe-agent) or the end (OpenHands) of an output.
  const text = output.length <= 1_200 ? output : `${sliceHead(output, 600)}\n${sliceTail(output, output.length - 600)}`
  const m = RETURN_CODE.exec(text) ?? COMMAND_FINISHED.exec(text) ?? EXIT_CODE.exec(text)
  return m ? Number(m[1]) : undefined
}
