/**
 * The SQLite writer thread (WriterThread): a connection of its own to the store's file, already migrated by
 * the store, doing the writes it is sent in order and answering each when it is committed.
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads'
import { SqliteWrites, openConnection } from './sqlite.js'
import type { WriteAnswer, WriteRequest } from './sqlite-writer.js'

if (!parentPort) throw new Error('sqlite-writer-thread runs as a worker thread')
const port: MessagePort = parentPort
const { path, maxSessionMemory } = workerData as { path: string; maxSessionMemory?: number }
const db = openConnection(path)
const writes = new SqliteWrites(db, maxSessionMemory)

port.on('message', (request: WriteRequest | { id: -1; name: 'close' }) => {
  if (request.name === 'close') {
    db.close()
    port.close()
    return
  }
  let answer: WriteAnswer
  try {
    const value = (writes[request.name] as (...args: unknown[]) => unknown)(...request.args)
    answer = { id: request.id, ok: true, value }
  } catch (err) {
    const e = err as { message?: string; code?: string }
    answer = { id: request.id, ok: false, message: e.message ?? String(err), ...(typeof e.code === 'string' ? { code: e.code } : {}) }
  }
  port.postMessage(answer)
})
