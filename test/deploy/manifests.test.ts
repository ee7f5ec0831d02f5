import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse, parseAllDocuments } from 'yaml'
import { ConfigSchema, loadConfig } from '../../src/server/config.js'
import { ROOT } from '../helpers/process.js'

const DEPLOY = join(ROOT, 'deploy')
const SETTINGS = new Set(Object.keys(ConfigSchema.properties))
const README_TABLE = new Set([...readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8').matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]!))

type Doc = { kind: string; metadata: { name: string; labels?: Record<string, string> }; [k: string]: unknown }
const k8s: Doc[] = readdirSync(join(DEPLOY, 'kubernetes'))
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((f) => parseAllDocuments(readFileSync(join(DEPLOY, 'kubernetes', f), 'utf8')).map((d) => d.toJS() as Doc))
const byKind = (kind: string): Doc => {
  const doc = k8s.find((d) => d.kind === kind)
  if (!doc) throw new Error(`no ${kind} in deploy/kubernetes`)
  return doc
}

interface Container {
  ports: { name: string; containerPort: number }[]
  envFrom: ({ configMapRef: { name: string } } | { secretRef: { name: string } })[]
  readinessProbe: { httpGet: { path: string; port: string } }
  livenessProbe: { httpGet: { path: string; port: string } }
}

describe('deploy/kubernetes', () => {
  const deployment = byKind('Deployment') as Doc & {
    spec: {
      replicas: number
      selector: { matchLabels: Record<string, string> }
      template: { metadata: { labels: Record<string, string> }; spec: { terminationGracePeriodSeconds: number; containers: Container[] } }
    }
  }
  const container = deployment.spec.template.spec.containers[0]!
  const configMap = byKind('ConfigMap') as Doc & { data: Record<string, string> }
  const secret = byKind('Secret') as Doc & { stringData: Record<string, string> }

  it('sets only settings the service reads and the README documents, in values it accepts', () => {
    const env = { ...configMap.data, ...secret.stringData }
    for (const name of Object.keys(env)) {
      expect(SETTINGS.has(name), `${name} is not a setting`).toBe(true)
      expect(README_TABLE.has(name), `${name} is not in the table of docs/configuration.md`).toBe(true)
    }
    const config = loadConfig({ ...env, ANTHROPIC_API_KEY: 'sk-ant-placeholder' })
    expect(config.HOST).toBe('0.0.0.0')
    expect(env.COMPACT_API_KEYS, 'a non-loopback HOST needs keys').toBeTruthy()
    expect(config.COMPACT_DB).toMatch(/^postgres:\/\//)
    // The keys and the database password live in the Secret, never in the ConfigMap.
    for (const name of ['COMPACT_API_KEYS', 'ANTHROPIC_API_KEY', 'COMPACT_DB', 'COMPACT_MASTER_KEY']) expect(configMap.data[name]).toBeUndefined()
  })

  it("probes readiness on /readyz and liveness on /healthz, on the probes' own port (a flood on the main one cannot hold them up)", () => {
    expect(container.readinessProbe.httpGet.path).toBe('/readyz')
    expect(container.livenessProbe.httpGet.path).toBe('/healthz')
    const probes = container.ports.find((p) => p.name === container.readinessProbe.httpGet.port)
    expect(probes?.containerPort).toBe(Number(configMap.data.COMPACT_PROBE_PORT))
    expect(container.ports.map((p) => p.containerPort)).toContain(Number(configMap.data.PORT))
    expect(container.livenessProbe.httpGet.port).toBe(probes?.name)
    expect((deployment.spec.template.metadata as { annotations?: Record<string, string> }).annotations?.['prometheus.io/port']).toBe(
      configMap.data.COMPACT_PROBE_PORT
    )
    const refs = container.envFrom.map((e) => ('configMapRef' in e ? e.configMapRef.name : e.secretRef.name))
    expect(refs.sort()).toEqual([configMap.metadata.name, secret.metadata.name].sort())
  })

  it('gives compactions in flight their grace at shutdown, and keeps the Service, autoscaler and budget on the same pods', () => {
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds * 1_000).toBeGreaterThan(Number(configMap.data.COMPACT_SHUTDOWN_GRACE_MS))
    const labels = deployment.spec.template.metadata.labels
    expect(deployment.spec.selector.matchLabels).toEqual(labels)
    const service = byKind('Service') as Doc & { spec: { selector: Record<string, string>; ports: { targetPort: string }[] } }
    expect(service.spec.selector).toEqual(labels)
    expect(container.ports.map((p) => p.name)).toContain(service.spec.ports[0]!.targetPort)
    const pdb = byKind('PodDisruptionBudget') as Doc & { spec: { selector: { matchLabels: Record<string, string> }; minAvailable: number } }
    expect(pdb.spec.selector.matchLabels).toEqual(labels)
    const hpa = byKind('HorizontalPodAutoscaler') as Doc & { spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number } }
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name })
    expect(hpa.spec.minReplicas).toBeGreaterThan(pdb.spec.minAvailable)
  })
})

describe('deploy/compose.yaml', () => {
  const compose = parse(readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8'), { merge: true }) as {
    services: Record<string, { environment?: Record<string, string>; ports?: string[]; image?: string; build?: unknown }>
  }
  const gateways = Object.entries(compose.services).filter(([, s]) => s.build !== undefined)

  it('runs two gateway replicas on one PostgreSQL and one Redis, with settings the service reads', () => {
    expect(gateways).toHaveLength(2)
    for (const [name, service] of gateways) {
      const env = service.environment ?? {}
      for (const variable of Object.keys(env)) expect(SETTINGS.has(variable), `${name}: ${variable} is not a setting`).toBe(true)
      expect(new URL(env.COMPACT_DB!).hostname).toBe('postgres')
      expect(new URL(env.COMPACT_REDIS_URL!).hostname).toBe('redis')
      expect(service.ports?.[0]).toMatch(new RegExp(`:${env.PORT}$`))
    }
    expect(Object.keys(compose.services)).toEqual(expect.arrayContaining(['postgres', 'redis', 'prometheus']))
  })

  it('has Prometheus scrape /metrics on every replica', () => {
    const prometheus = parse(readFileSync(join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8')) as {
      scrape_configs: { metrics_path: string; static_configs: { targets: string[] }[] }[]
    }
    const job = prometheus.scrape_configs[0]!
    expect(job.metrics_path).toBe('/metrics')
    const port = gateways[0]![1].environment!.PORT
    expect(job.static_configs.flatMap((c) => c.targets).sort()).toEqual(gateways.map(([name]) => `${name}:${port}`).sort())
  })
})
