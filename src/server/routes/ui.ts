import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { NotFoundError } from '../../contract/errors.js'
import { OPEN, openResponses } from './security.js'

/** The page's files, by name, with their types. */
const FILES = { 'index.html': 'text/html; charset=utf-8', 'app.js': 'text/javascript; charset=utf-8', 'app.css': 'text/css; charset=utf-8' } as const
type UiFile = keyof typeof FILES

/**
 * Everything the page may load or call comes from the gateway; it is framed by no one, and its address
 * (never holding the key anyway) is sent nowhere.
 */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-cache'
}

/** The built page (npm run build writes it to dist/ui): beside the compiled server, or under dist/ when run from the sources. */
export function readUi(): Map<UiFile, Buffer> | undefined {
  for (const dir of ['../../ui/', '../../../dist/ui/']) {
    const folder = fileURLToPath(new URL(dir, import.meta.url))
    // (src/ui holds the page's sources, index.html among them: a built folder has its bundle too)
    if (!(Object.keys(FILES) as UiFile[]).every((f) => existsSync(`${folder}${f}`))) continue
    try {
      return new Map((Object.keys(FILES) as UiFile[]).map((f) => [f, readFileSync(`${folder}${f}`)]))
    } catch {
      return undefined
    }
  }
  return undefined
}

/** The sessions page at /ui/: static files, open to all (they hold no data; every call they make needs the key). */
export const uiRoutes: FastifyPluginAsync<{ files: Map<UiFile, Buffer> | undefined }> = async (app, { files }) => {
  const send = (file: UiFile) => async (_request: unknown, reply: import('fastify').FastifyReply) => {
    const body = files?.get(file)
    if (!body) throw new NotFoundError('the web page is not built: run npm run build')
    return reply.headers(PAGE_HEADERS).type(FILES[file]).send(body)
  }
  app.get(
    '/ui/',
    {
      schema: {
        tags: ['health'],
        operationId: 'getSessionsPage',
        summary: 'The sessions page: sign in with a key, see sessions, their compactions and cold layer, delete one',
        security: OPEN,
        response: {
          200: { description: 'An HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
          404: Type.Ref('ErrorResponse', { description: 'The page is not built (npm run build writes it).' }),
          ...openResponses()
        }
      }
    },
    send('index.html')
  )
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/ui/:file',
    {
      schema: {
        tags: ['health'],
        operationId: 'getSessionsPageAsset',
        summary: "The sessions page's script and style sheet",
        security: OPEN,
        params: Type.Object({ file: Type.Union([Type.Literal('app.js'), Type.Literal('app.css')]) }),
        response: {
          200: { description: 'The file', content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } } },
          400: Type.Ref('ErrorResponse', { description: 'No such file of the page.' }),
          404: Type.Ref('ErrorResponse', { description: 'The page is not built (npm run build writes it).' }),
          ...openResponses()
        }
      }
    },
    async (request, reply) => send(request.params.file)(request, reply)
  )
}
