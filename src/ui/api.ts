/** The gateway's API as the page calls it: the key in a header (never in a URL), errors in one shape. */

const KEY_ITEM = 'compaction-gateway.key'

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message)
  }
}

/** The key this tab signed in with ('' for a gateway without keys), or undefined before signing in. */
export function storedKey(): string | undefined {
  return sessionStorage.getItem(KEY_ITEM) ?? undefined
}

export function keepKey(key: string): void {
  sessionStorage.setItem(KEY_ITEM, key)
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_ITEM)
}

/** Calls the API with `key`; an answer that is not 2xx throws with the gateway's own message. */
export async function api<T>(key: string, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {}
  if (key !== '') headers['x-api-key'] = key
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res: Response
  try {
    res = await fetch(path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}), credentials: 'omit', cache: 'no-store' })
  } catch {
    throw new ApiFailure(0, 'the gateway cannot be reached')
  }
  const text = await res.text()
  let json: unknown
  try {
    json = text === '' ? undefined : JSON.parse(text)
  } catch {
    json = undefined
  }
  if (!res.ok) {
    const message = (json as { error?: { message?: string } } | undefined)?.error?.message ?? `${res.status} ${res.statusText}`
    throw new ApiFailure(res.status, message)
  }
  return json as T
}

/** A path with its parts encoded. */
export function path(strings: TemplateStringsArray, ...parts: string[]): string {
  return strings.reduce((out, s, i) => out + s + (i < parts.length ? encodeURIComponent(parts[i] ?? '') : ''), '')
}
