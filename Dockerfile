# syntax=docker/dockerfile:1
# compaction-gateway: build with dev dependencies, run the compiled server with production ones only.

FROM node:22.14.0-bookworm-slim AS build
# better-sqlite3 compiles its native addon when no prebuilt binary can be fetched.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/build.mjs scripts/build-ui.mjs ./scripts/
RUN npm run build && npm prune --omit=dev

FROM node:22.14.0-bookworm-slim AS runtime
# GLIBC_TUNABLES: glibc's heap kept rather than handed back at each request's end, so that the next body is not
# written into pages faulted in anew (why and what it costs: docs/operations.md, Image).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    COMPACT_DB=/app/data/compaction.db \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4194304:glibc.malloc.trim_threshold=33554432
WORKDIR /app
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json openapi.yaml ./
RUN mkdir -p /app/data && chown node:node /app/data
VOLUME ["/app/data"]
USER node
EXPOSE 8080
# Listening on 0.0.0.0 needs COMPACT_API_KEYS (or COMPACT_ALLOW_NO_AUTH=1): the server refuses otherwise.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node itself is PID 1, so SIGTERM reaches the server and in-flight compactions finish.
CMD ["node", "dist/server/main.js"]
