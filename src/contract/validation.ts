import { Ajv, type ValidateFunction } from 'ajv'
import type { TSchema } from 'typebox'
import { KNOWN_BLOCK_TYPES } from '../compaction/validate.js'
import { CompactRequestChecked, type CompactRequestBody, SESSION_ID_PATTERN, SHARED_SCHEMAS } from './schemas.js'
import { at, jsonProblem } from '../compaction/index.js'
import { type ItemsField, parseJsonBytes } from './wire.js'

/**
 * Schema failures as one sentence that names the place, and the request schema compiled outside
 * Fastify (a worker validates the bodies it parses with the same rules and the same words).
 */
export interface AjvIssue {
  instancePath: string
  message?: string
  keyword: string
  params: Record<string, unknown>
}

function depth(issue: AjvIssue): number {
  return issue.instancePath === '' ? 0 : issue.instancePath.split('/').length
}

/** What one failed keyword asks for, as a phrase: "an integer", "at least 1000", "\"off\"". */
function wanted(issue: AjvIssue): string | undefined {
  const p = issue.params
  switch (issue.keyword) {
    case 'type':
      return p.type === 'integer' ? 'an integer' : p.type === 'object' ? 'an object' : p.type === 'array' ? 'an array' : `a ${String(p.type)}`
    case 'const':
      return JSON.stringify(p.allowedValue)
    case 'enum':
      return `one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`
    case 'minimum':
      return `at least ${String(p.limit)}`
    case 'maximum':
      return `at most ${String(p.limit)}`
    case 'minLength':
      return `at least ${String(p.limit)} characters long`
    case 'pattern':
      return p.pattern === SESSION_ID_PATTERN ? 'a session id with no control character, and not "." or ".."' : undefined
    case 'maxLength':
      return `at most ${String(p.limit)} characters long`
    case 'minItems':
      return `at least ${String(p.limit)} items`
    default:
      return undefined
  }
}

const BLOCK_PATH = /\/messages\/\d+\/content\/\d+$/
const BLOCK_HINT = `a block is an object whose \`type\` is one of ${KNOWN_BLOCK_TYPES.join(', ')} (or a newer type)`

/**
 * A schema failure as one sentence that names the place, e.g. `body.messages[3].role must be ...`.
 * Of the issues Ajv reports, the deepest is the one to name (a union's branches each fail at the top);
 * where all branches of a union fail at the same place, the sentence lists what each would take.
 */
export function describeValidation(issues: readonly AjvIssue[], context: string): { message: string; path: string } {
  const summary = (k: string): boolean => k === 'anyOf' || k === 'if'
  const issue = issues.reduce((best, i) => (!summary(i.keyword) && (summary(best.keyword) || depth(i) > depth(best)) ? i : best), at(issues, 0))
  const path = issue.instancePath || ''
  let text: string
  if (issue.keyword === 'additionalProperties') {
    const field = String(issue.params.additionalProperty)
    return describeAt(`${path}/${field}`, context, 'is not a known field')
  } else if (issue.keyword === 'required') {
    const field = String(issue.params.missingProperty)
    text = BLOCK_PATH.test(path) && field === 'type' ? `has no \`type\`: ${BLOCK_HINT}` : `needs the field \`${field}\``
  } else {
    const here = issues.filter((i) => i.instancePath === issue.instancePath)
    // A literal's branch fails twice (its type, then its value); the value says it all.
    const literal = here.some((i) => i.keyword === 'const' || i.keyword === 'enum')
    const alternatives = [
      ...new Set(
        here
          .filter((i) => !(literal && i.keyword === 'type' && i.params.type === 'string'))
          .map(wanted)
          .filter((w): w is string => w !== undefined)
      )
    ]
    text = alternatives.length > 0 ? `must be ${alternatives.join(' or ')}` : (issue.message ?? 'is invalid')
    if (BLOCK_PATH.test(path)) text += `: ${BLOCK_HINT}`
  }
  return describeAt(path, context, text)
}

function describeAt(path: string, context: string, text: string): { message: string; path: string } {
  const where = path === '' ? context : `${context}${path.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.')}`
  return { message: `${where} ${text}`, path: path === '' ? '/' : path }
}

/**
 * The one set of options every check runs with: no coercion, no stripping, no defaults (what a client sent is
 * what is checked), and Infinity and NaN no numbers (`1e400` parses to Infinity, which an integer schema would
 * otherwise take). Ajv is the one engine: every route's schema, every body read outside Fastify, the summary
 * tool's input and the configuration are checked by it.
 */
const AJV_OPTIONS = { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false, strict: false, strictNumbers: true } as const

let bodyAjv: Ajv | undefined
function ajvForBodies(): Ajv {
  if (!bodyAjv) {
    bodyAjv = new Ajv(AJV_OPTIONS)
    for (const schema of SHARED_SCHEMAS) bodyAjv.addSchema(schema as object)
  }
  return bodyAjv
}

/** URL parts (path parameters, query strings) arrive as text: the same options but that `?limit=20` meets an integer schema. */
let urlAjv: Ajv | undefined
function ajvForUrlParts(): Ajv {
  urlAjv ??= new Ajv({ ...AJV_OPTIONS, coerceTypes: true })
  return urlAjv
}

/**
 * A schema's check, a body's or a URL part's (its text coerced): compiled at its first use, once a process
 * however many readers and routes check it (Ajv keeps what it compiled, by the schema object).
 */
export function compiledCheck<T = unknown>(schema: TSchema | object, part: 'body' | 'url' = 'body'): ValidateFunction<T> {
  return (part === 'body' ? ajvForBodies() : ajvForUrlParts()).compile<T>(schema as object)
}

/** Fastify's validator compiler, for every route: a body checked as the body readers check, a URL part with its text coerced. */
export function routeValidatorCompiler({ schema, httpPart }: { schema: unknown; httpPart?: string }): ValidateFunction {
  return compiledCheck(schema as object, httpPart === 'body' ? 'body' : 'url')
}

/** A body checked against its route's schema: the value, typed, or the first problem in the words a client is answered with. */
export type BodyRead<T> = { ok: true; value: T } | ({ ok: false } & RequestProblem)

/**
 * A route's body schema as the one check of what it reads, wherever that is read: the compact route's
 * inline or in a worker, a proxy's once the body is read (a body left as bytes never meets Fastify's
 * validation, so these routes check their own schema, compiled once, here). `context` begins the sentence.
 */
export function bodyReader<T>(schema: TSchema, context = 'body'): (value: unknown) => BodyRead<T> {
  let validate: ValidateFunction | undefined
  return (value) => {
    validate ??= compiledCheck(schema)
    if (validate(value)) return { ok: true, value: value as T }
    return { ok: false, kind: 'invalid_request', ...describeValidation((validate.errors ?? []) as AjvIssue[], context) }
  }
}

/** A request that could not be read, as both paths answer it: the kind, the sentence and the place. */
export interface RequestProblem {
  kind: 'invalid_request'
  message: string
  path?: string
}

const checkCompactRequest = bodyReader<CompactRequestBody>(CompactRequestChecked)

/**
 * The one way a JSON body is read, wherever it goes: its bytes parsed (its history's array element by
 * element, `field`), then looked over once for nesting past the limit and for keys that could poison a
 * prototype, escaped forms included; or the first problem, in the words and at the place a client is
 * answered with.
 */
export function readJson(bytes: Uint8Array, field: ItemsField = 'messages'): { ok: true; value: unknown } | ({ ok: false } & RequestProblem) {
  let parsed: unknown
  try {
    parsed = parseJsonBytes(bytes, field)
  } catch (err) {
    return { ok: false, kind: 'invalid_request', message: `the body is not valid JSON: ${(err as Error).message}` }
  }
  const problem = jsonProblem(parsed)
  if (problem) return { ok: false, kind: 'invalid_request', message: problem.message, path: problem.path }
  return { ok: true, value: parsed }
}

/**
 * The one way a /v1/compact body is read, inline or in a worker: read as every JSON body is (readJson), then
 * checked against the request schema; or the first problem, in the words and at the place a client is
 * answered with.
 */
export function readCompactRequest(bytes: Uint8Array): { ok: true; body: CompactRequestBody } | ({ ok: false; value?: unknown } & RequestProblem) {
  const read = readJson(bytes)
  if (!read.ok) return read
  return checkedCompact(read.value)
}

/**
 * A /v1/compact body the service made of what it has read already (a proxy's compaction of a Responses input):
 * looked over and checked as readCompactRequest checks bytes, with no writing out and reading back.
 */
export function checkCompactValue(parsed: unknown): { ok: true; body: CompactRequestBody } | ({ ok: false; value?: unknown } & RequestProblem) {
  const problem = jsonProblem(parsed)
  if (problem) return { ok: false, kind: 'invalid_request', message: problem.message, path: problem.path }
  return checkedCompact(parsed)
}

/** A body looked over already (readJson's nesting and prototype check), against the request schema. */
function checkedCompact(parsed: unknown): { ok: true; body: CompactRequestBody } | ({ ok: false; value?: unknown } & RequestProblem) {
  const checked = checkCompactRequest(parsed)
  // a body that parsed but breaks the schema is given back too: what it says of itself labels its refusal
  if (!checked.ok) return { ...checked, value: parsed }
  return { ok: true, body: checked.value }
}
