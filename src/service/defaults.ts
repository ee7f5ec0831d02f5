/** Defaults the service itself needs, beside the server's configuration (which takes them from here). */

/** The budget that sizes the tail and the summary when a request turns auto compaction off. */
export const DEFAULT_BUDGET_TOKENS = 45_000
