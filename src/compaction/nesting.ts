/**
 * One look over a parsed JSON body, before anything else walks it: how deep it nests (every recursive
 * walk after this one, the serializer's included, relies on the bound) and whether it carries a key
 * that could poison a prototype. JSON.parse makes `__proto__` an own key whatever escapes spelled it,
 * so looking at the parsed keys catches `"\u005f_proto__"` as well as the plain form.
 */

/** Deepest nesting of arrays and objects a body may have; real histories stay far below it. */
export const MAX_JSON_DEPTH = 128

export interface JsonProblem {
  kind: 'depth' | 'prototype'
  /** JSON pointer to the offending value. */
  path: string
  message: string
}

function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null
}

function poisonKey(container: object): string | undefined {
  if (Object.prototype.hasOwnProperty.call(container, '__proto__')) return '__proto__'
  const ctor = (container as Record<string, unknown>).constructor
  if (Object.prototype.hasOwnProperty.call(container, 'constructor') && isContainer(ctor) && Object.prototype.hasOwnProperty.call(ctor, 'prototype')) {
    return 'constructor'
  }
  return undefined
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

/**
 * The first problem of a parsed body, or undefined. Iterative: a body nested a million deep is
 * refused without a deep stack. Only on a fault is the path found, by a second walk bounded by the limit.
 */
export function jsonProblem(value: unknown, maxDepth = MAX_JSON_DEPTH): JsonProblem | undefined {
  if (!isContainer(value)) return undefined
  const values: object[] = [value]
  const depths: number[] = [1]
  for (let node = values.pop(), depth = depths.pop(); node !== undefined && depth !== undefined; node = values.pop(), depth = depths.pop()) {
    if (depth > maxDepth) return locate(value, maxDepth)
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i]
        if (isContainer(child)) {
          values.push(child)
          depths.push(depth + 1)
        }
      }
      continue
    }
    if (poisonKey(node) !== undefined) return locate(value, maxDepth)
    for (const key in node) {
      const child = (node as Record<string, unknown>)[key]
      if (isContainer(child)) {
        values.push(child)
        depths.push(depth + 1)
      }
    }
  }
  return undefined
}

/** The path to the first fault, depth first; recursion no deeper than maxDepth + 1. */
function locate(root: object, maxDepth: number): JsonProblem | undefined {
  const path: string[] = []
  const visit = (node: object, depth: number): JsonProblem | undefined => {
    if (depth > maxDepth) {
      return { kind: 'depth', path: pointerOf(path), message: `${placeOf(path)} nests deeper than ${maxDepth} levels of arrays and objects` }
    }
    if (!Array.isArray(node)) {
      const key = poisonKey(node)
      if (key !== undefined) {
        path.push(key)
        const problem: JsonProblem = {
          kind: 'prototype',
          path: pointerOf(path),
          message: `${placeOf(path)}: the key "${key}" is not allowed (it could poison a prototype)`
        }
        path.pop()
        return problem
      }
    }
    for (const key in node) {
      const child = (node as Record<string, unknown>)[key]
      if (!isContainer(child)) continue
      path.push(key)
      const found = visit(child, depth + 1)
      path.pop()
      if (found) return found
    }
    return undefined
  }
  return visit(root, 1)
}

function pointerOf(path: readonly string[]): string {
  return path.length === 0 ? '/' : `/${path.map(escapePointer).join('/')}`
}

function placeOf(path: readonly string[]): string {
  if (path.length === 0) return 'body'
  return path.reduce((s, key) => (/^\d+$/.test(key) ? `${s}[${key}]` : `${s}.${key}`), 'body')
}
