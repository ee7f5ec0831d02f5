/** Writes openapi.yaml from the route schemas: `npm run openapi`. */
import { writeFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { openapiYaml } from '../test/helpers/openapi.js'

const path = resolve(import.meta.dirname, '..', 'openapi.yaml')
writeFileSync(path, await openapiYaml())
process.stdout.write(`wrote ${path}\n`)
