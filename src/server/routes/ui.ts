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
  // The page's address in the contract: /ui, sent on to the page's folder (its links are relative to it). The
  // folder itself is a web page's, not an API's path, and stays out of the contract (no path ends in a slash there).
  app.get(
    '/ui',
    {
      schema: {
        tags: ['health'],
        operationId: 'getSessionsPage',
        summary: 'The sessions page: sign in with a key, see sessions, their compactions and cold layer, delete one',
        description: 'A web page, not an API: this address sends the browser on to the page, at /ui/ (whose script and style sheet are /ui/{file}).',
        security: OPEN,
        response: {
          301: {
            description: 'The page is at /ui/.',
            headers: { location: { type: 'string', description: '/ui/' } },
            content: { 'text/plain': { schema: { type: 'string' } } }
          },
          ...openResponses()
        }
      }
    },
    async (_request, reply) => reply.redirect('/ui/', 301)
  )
  app.get('/ui/', { schema: { hide: true } }, send('index.html'))
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
