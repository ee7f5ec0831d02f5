/**
 * A SQLite store thread (StoreThread): a connection of its own to the store's file, already migrated by
 * the store, doing the reads or the writes it is sent, in order, and answering each when done.
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads'
import { SqliteReads, SqliteWrites, openConnection } from './sqlite.js'
import type { ThreadAnswer, ThreadRequest } from './sqlite-threads.js'
import { type KeyMaterial, KeyRing } from './keyring.js'

if (!parentPort) throw new Error('sqlite-thread runs as a worker thread')
const port: MessagePort = parentPort
const { role, path, maxSessionMemory, maxSessionBytes, keys } = workerData as {
  role: 'write' | 'read'
  path: string
  maxSessionMemory?: number
  maxSessionBytes?: number
  keys?: KeyMaterial
}
const db = openConnection(path)
if (role === 'read') db.pragma('query_only = 1')
const ring = new KeyRing(keys)
const target: object = role === 'write' ? new SqliteWrites(db, maxSessionMemory, maxSessionBytes, ring) : new SqliteReads(db, ring)

port.on('message', (request: ThreadRequest) => {
  if (request.id === -1) {
    db.close()
    port.close()
    return
  }
  let answer: ThreadAnswer
  try {
    const method = (target as Record<string, ((...args: unknown[]) => unknown) | undefined>)[request.name]
    if (!method) throw new Error(`no store operation ${request.name}`)
    const value = method.call(target, ...request.args)
    answer = { id: request.id, ok: true, value }
  } catch (err) {
    const e = err as { message?: string; code?: string }
    answer = { id: request.id, ok: false, message: e.message ?? String(err), ...(typeof e.code === 'string' ? { code: e.code } : {}) }
  }
  port.postMessage(answer)
})
