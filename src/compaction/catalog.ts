/**
 * What each agent's tools do to files, as data: the tool names differ between agents (Claude Code,
 * OpenHands, SWE-agent, mini-swe-agent, opencode, Gemini CLI), the meanings do not. Names match case-insensitively.
 */
export type ToolKind = 'write' | 'read' | 'editor' | 'patch' | 'shell' | 'open'

export interface ToolRule {
  kind: ToolKind
  names: readonly string[]
  /** Input fields that may hold the file path, first match wins. */
  pathFields?: readonly string[]
  /** For `editor` tools: the field naming the sub-command, and which sub-commands write or read. */
  commandField?: string
  writes?: readonly string[]
  reads?: readonly string[]
  /** For `shell` and `patch` tools: the input fields that hold the command or the patch text. */
  textFields?: readonly string[]
}

const PATH_FIELDS = ['file_path', 'path', 'filePath', 'absolute_path', 'notebook_path', 'filename', 'target_file', 'file'] as const

export const TOOL_CATALOG: readonly ToolRule[] = [
  {
    kind: 'write',
    names: [
      'Edit',
      'MultiEdit',
      'Write',
      'NotebookEdit',
      'write',
      'edit',
      'create',
      'insert',
      'write_file',
      'edit_file',
      'create_file',
      'replace_in_file',
      'replace'
    ],
    pathFields: PATH_FIELDS
  },
  { kind: 'open', names: ['open', 'goto'], pathFields: PATH_FIELDS },
  { kind: 'read', names: ['Read', 'read', 'view', 'read_file', 'view_file', 'NotebookRead', 'cat'], pathFields: PATH_FIELDS },
  {
    kind: 'editor',
    names: ['str_replace_editor', 'str_replace_based_edit_tool', 'text_editor', 'edit_tool'],
    pathFields: ['path', 'file_path'],
    commandField: 'command',
    writes: ['create', 'str_replace', 'insert', 'undo_edit', 'write'],
    reads: ['view']
  },
  { kind: 'patch', names: ['apply_patch', 'patch', 'ApplyPatch'], textFields: ['input', 'patch', 'diff', 'patchText'] },
  {
    kind: 'shell',
    names: ['Bash', 'bash', 'execute_bash', 'shell', 'run_command', 'run_terminal_cmd', 'terminal', 'exec', 'run_shell_command', 'local_shell'],
    textFields: ['command', 'cmd', 'script']
  }
]

const BY_NAME = new Map<string, ToolRule>()
for (const rule of TOOL_CATALOG) {
  for (const name of rule.names) {
    // `patch` as a tool name carries patch text; as a `write` rule it would want a path. Text wins.
    if (!BY_NAME.has(name.toLowerCase()) || rule.kind === 'patch') BY_NAME.set(name.toLowerCase(), rule)
  }
}

export function toolRule(name: string): ToolRule | undefined {
  return BY_NAME.get(name.toLowerCase())
}
