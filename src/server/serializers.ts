import { SerializerSelector, type SerializerFactory, type Serializer } from '@fastify/fast-json-stringify-compiler'

/**
 * Fastify's own response serializers (fast-json-stringify), each compiled once a process: an app compiles
 * one a response schema of each route when it starts, most of its start's time, and a process that builds
 * more than one app (the tests build one a file, some several) compiled the same code again.
 * The key is everything the compilation reads: the shared schemas, the options and the route's schema.
 */
const compiled = new Map<string, Serializer>()
const selector = SerializerSelector()

export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = selector(externalSchemas, options)
  const context = JSON.stringify([externalSchemas ?? null, options ?? null])
  return (route) => {
    const key = `${context}\u0000${JSON.stringify(route.schema)}`
    let serializer = compiled.get(key)
    if (!serializer) {
      serializer = compile(route)
      compiled.set(key, serializer)
    }
    return serializer
  }
}
