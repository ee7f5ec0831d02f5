/**
 * Every default the service runs with, in one place: first the settings' (which the COMPACT_* variables
 * override; src/server/config.ts reads them from here), then the fixed operational values of each part.
 * In the contract's layer because every layer may read it (the core excepted, which takes no defaults).
 */
import { availableParallelism } from 'node:os'

/** The budget that sizes the tail and the summary when a request turns auto compaction off. */
export const DEFAULT_BUDGET_TOKENS = 45_000
export const DEFAULT_PORT = 8080
export const DEFAULT_HOST = '127.0.0.1'
export const DEFAULT_KEEP_TURNS = 8
export const DEFAULT_BODY_LIMIT_MB = 32
export const DEFAULT_MODEL = 'claude-sonnet-5-5'
export const DEFAULT_SUMMARIZER_TIMEOUT_MS = 60_000
export const DEFAULT_SUMMARIZER_INPUT_TOKENS = 100_000
export const DEFAULT_MAX_SUMMARIES = 8
export const DEFAULT_SUMMARY_QUEUE = 16
export const DEFAULT_RATE_LIMIT_PER_MIN = 600
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000
export const DEFAULT_DB = './data/compaction.db'
export const DEFAULT_CACHE_TTL_S = 86_400
export const DEFAULT_RETENTION_DAYS = 30
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000
export const DEFAULT_BODY_TIMEOUT_MS = 120_000
export const DEFAULT_AUTH_FAILURES_PER_MIN = 20
/** One compaction worker per core. */
export const DEFAULT_WORKERS = availableParallelism()
/**
 * Bodies from this size go to a worker. A lone compaction is answered sooner inline at every size
 * `npm run bench` measures ("where a body goes": a worker adds a few milliseconds); workers are for keeping
 * the event loop free and using both cores under load. At 256 KB an inline compaction holds the event
 * loop for about 10 ms.
 */
export const DEFAULT_WORKER_MIN_KB = 256
/**
 * With a summary model, bodies from this size (or COMPACT_WORKER_MIN_KB where lower) go to the workers: the
 * model's seconds dwarf the hop to a worker, and a body built to make redaction work hard (every few
 * characters a secret's prefix that nothing completes) costs up to about 0.3 ms a KiB a pass, so that a larger
 * one redacted inline would hold the event loop past 20 ms (bench/stall.ts).
 */
export const MODEL_WORKER_MIN_KB = 32
export const DEFAULT_MAX_INFLIGHT_MB = 256
/** The Messages API the proxy forwards to when ANTHROPIC_BASE_URL is not set. */
export const DEFAULT_UPSTREAM_URL = 'https://api.anthropic.com'
/** The upstream may take this long to start answering, and may then be silent this long between chunks. */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 600_000
export const DEFAULT_UPSTREAM_CONNECTIONS = 128
/** The proxy writes a session's next summary in the background from this share of its budget. */
export const DEFAULT_PRECOMPUTE_AT = 0.75
/** After a proxied compaction the context lands at this share of the room between system + tools and the budget. */
export const DEFAULT_TARGET_SHARE = 0.5
/** How long the upstream's prompt cache lasts without a request (the APIs' default: five minutes). */
export const DEFAULT_PROMPT_CACHE_S = 300
/**
 * The share of the budget past which a conversation that comes back after its prompt cache lapsed is
 * compacted then: its whole prefix is written to the cache again anyway, so the rewrite costs nothing extra.
 */
export const LAPSED_CACHE_SHARE = 0.6
/**
 * The prices (per million tokens) the overview's estimate of what compaction saved is made at: Claude
 * Sonnet's list prices in USD (cache writes of 5 minutes at 1.25x input, reads at 0.1x).
 */
export const DEFAULT_PRICES_PER_MTOK = { input: 3, output: 15, cache_write: 3.75, cache_read: 0.3 } as const
/** The currency those prices are in (an ISO 4217 code: the page writes the estimate in it). */
export const DEFAULT_PRICE_CURRENCY = 'USD'
/** The overview's range when none is asked for: the last week. */
export const DEFAULT_OVERVIEW_DAYS = 7
/** The longest range an overview reads (its tallies are kept COMPACT_RETENTION_DAYS anyway). */
export const MAX_OVERVIEW_DAYS = 366

// The HTTP server
/** How long a kept-alive connection may sit idle between requests. */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000
/** The request line and headers must arrive within this (and within the body timeout). */
export const HEADERS_TIMEOUT_MS = 20_000
/** A route or session id in the URL may be this long (a session id of 200 characters, percent-encoded). */
export const MAX_PARAM_LENGTH = 1_000

// Bodies
/** Fastify's own body limit, where none is set. */
export const DEFAULT_BODY_LIMIT = 1_048_576

// Refusals
/** How long a refusal waits for the rest of its body before it is sent with the connection closed. */
export const LINGER_MS = 5_000
/**
 * The most bytes a refusal reads and drops for its client to see the answer: a body is refused for being
 * over the limit (by as much as the client likes), so the bound is a multiple of the limit, not the limit.
 */
export function lingerBytes(bodyLimitBytes: number): number {
  return Math.max(4 * bodyLimitBytes, 64 * 1024 * 1024)
}

// The summary limiter
/** What a 503 for too many summaries in flight tells the client to wait. */
export const OVERLOADED_RETRY_AFTER_S = 5

// The store's upkeep
/** How often old records and expired cache rows are pruned. */
export const PRUNE_INTERVAL_MS = 3_600_000

// Sessions' pages
export const DEFAULT_PAGE_SIZE = 20
/** A timeline's points by default and at most: a chart of a long session, with no summary text. */
export const DEFAULT_TIMELINE_POINTS = 2_000
export const MAX_TIMELINE_POINTS = 10_000
export const MAX_PAGE_SIZE = 100

// Recall
export const DEFAULT_RECALL_LIMIT = 10
export const MAX_RECALL_LIMIT = 50

// The proxy
/** Sessions whose anchors are remembered at most; the least recently used is forgotten first. */
export const MAX_PROXY_SESSIONS = 10_000
/** A session not seen for this long is forgotten (with the summary written ahead for it). */
export const PROXY_SESSION_IDLE_MS = 3_600_000
/** How long a conversation's anchors are kept in the store after its last change (a restart, a replica finds them). */
export const ANCHOR_TTL_MS = 86_400_000

// SQLite's writer thread
/**
 * The most writes that may wait for the writer thread before a caller that asks for room waits too: under
 * more compactions than the writer can index, answers then slow to the writer's pace instead of the backlog
 * (and its memory, and the time a shutdown takes to write it) growing without bound.
 */
export const MAX_WRITE_BACKLOG = 16

// The cold layer
/** Most cold-layer entries one session keeps; past it the oldest go. */
export const MAX_SESSION_MEMORY = 50_000
/**
 * Most bytes of text one session's cold layer keeps (COMPACT_MEMORY_SESSION_MB); past it the oldest
 * entries go. A long day's session removes some tens of megabytes of text (a compaction of a 200,000-token
 * window removes about 600 KB; the tool outputs a clearing removes come on top).
 */
export const MAX_SESSION_MEMORY_BYTES = 64 * 1024 * 1024

// The log
/** How long a log line may wait in the buffer before it is written. */
export const LOG_FLUSH_MS = 200

/**
 * The upper bounds (ms) of the crossing waits' buckets; a wait above the last is counted past it. A
 * crossing whose summary was ready waits for the splice alone (under 10 ms); one that waited for a model,
 * for its answer (seconds).
 */
export const WAIT_BOUNDS_MS = [10, 100, 1_000, 10_000] as const
