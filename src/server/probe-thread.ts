/**
 * The probes' own listener (COMPACT_PROBE_PORT), in a thread of its own: a flood of bodies that keeps the
 * main event loop busy cannot hold up the answers of `/healthz`, `/readyz` and `/metrics` here. It answers
 * from what the main thread shares with it: a heartbeat the main loop beats (liveness: the loop turns),
 * the readiness the main thread last checked (the store written), and the metrics it last rendered.
 */
import { createServer } from 'node:http'
import { parentPort, workerData } from 'node:worker_threads'
import { type ProbeShared, probeAnswer } from './probe-state.js'

if (!parentPort) throw new Error('probe-thread runs as a worker thread')
const port = parentPort
const { host, listen, shared, keys } = workerData as { host: string; listen: number; shared: SharedArrayBuffer; keys: string }
const state: ProbeShared = { times: new Float64Array(shared), metrics: '', keys }

port.on('message', (message: { metrics?: string; close?: true }) => {
  if (message.metrics !== undefined) state.metrics = message.metrics
  if (message.close) server.close(() => port.close())
})

const server = createServer((req, res) => {
  const { status, type, body } = probeAnswer(state, req.method ?? 'GET', (req.url ?? '/').split('?')[0] ?? '/', Date.now())
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' })
  res.end(body)
})
server.keepAliveTimeout = 5_000
server.listen(listen, host, () => {
  const address = server.address()
  port.postMessage({ listening: typeof address === 'object' && address !== null ? address.port : listen })
})
