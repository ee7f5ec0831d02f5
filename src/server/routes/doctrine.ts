import type { FastifyPluginAsync } from 'fastify'
import { Type } from 'typebox'
import { KEYED, keyedResponses } from './security.js'
import { DOCTRINE_SHA256, DOCTRINE_TEXT, DOCTRINE_VERSION } from '../../prompts/doctrine.js'

export const Doctrine = Type.Object(
  { version: Type.String(), sha256: Type.String(), text: Type.String() },
  { additionalProperties: false, description: 'The compaction prompt the server owns; clients cannot replace it.' }
)

export const doctrineRoutes: FastifyPluginAsync = async (app) => {
  app.get(
    '/v1/doctrine',
    {
      schema: {
        tags: ['compaction'],
        summary: 'The server-owned compaction prompt: version, hash and text',
        operationId: 'getDoctrine',
        security: KEYED,
        response: { 200: Doctrine, ...keyedResponses() }
      }
    },
    async () => ({ version: DOCTRINE_VERSION, sha256: DOCTRINE_SHA256, text: DOCTRINE_TEXT })
  )
}
