import { once } from 'node:events'
import { type Server, type Socket, connect, createServer } from 'node:net'

/** A TCP relay to a real service that a test can take down and bring back on the same port (a database that goes away). */
export class TcpProxy {
  private server: Server | undefined
  private readonly sockets = new Set<Socket>()
  port = 0

  constructor(
    private readonly targetHost: string,
    private targetPort: number
  ) {}

  /** New connections go to `port` from now on; the ones open are cut, so a kept-alive client reconnects there. */
  retarget(port: number): void {
    this.targetPort = port
    for (const s of this.sockets) s.destroy()
  }

  /** While true, connections stay open and new ones are taken, but nothing passes either way (packets dropped). */
  private holes = false

  /** From now on nothing passes, as when a network drops packets: no reset, no answer, until down() and up(). */
  blackhole(): void {
    this.holes = true
    for (const s of this.sockets) {
      s.unpipe()
      s.pause()
    }
  }

  async up(): Promise<this> {
    this.holes = false
    this.server = createServer((client) => {
      if (this.holes) {
        this.sockets.add(client)
        client.on('close', () => this.sockets.delete(client))
        client.on('error', () => undefined)
        client.pause()
        return
      }
      const upstream = connect(this.targetPort, this.targetHost)
      for (const s of [client, upstream]) {
        this.sockets.add(s)
        s.on('close', () => this.sockets.delete(s))
        s.on('error', () => undefined)
      }
      client.pipe(upstream).pipe(client)
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
    })
    this.server.listen(this.port, '127.0.0.1')
    await once(this.server, 'listening')
    this.port = (this.server.address() as { port: number }).port
    return this
  }

  /** Every connection cut, and no new one taken, until up() again. */
  async down(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve())
    for (const s of this.sockets) s.destroy()
    await closed
    this.server = undefined
  }
}
