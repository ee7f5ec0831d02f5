import { Ajv } from 'ajv'
import { SHARED_SCHEMAS } from '../../src/contract/schemas.js'

/** Ajv with the contract's shared schemas, so that a schema's $refs resolve as they do in the OpenAPI document. */
export function contractAjv(): Ajv {
  const a = new Ajv({ strict: false })
  for (const s of SHARED_SCHEMAS) a.addSchema(s as object)
  return a
}
