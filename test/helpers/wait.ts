/**
 * Waits, polling, until `check` holds, and fails naming what never happened. What a test asserts is the
 * condition, never the time it took: the limit only keeps a hung run from lasting for ever, so it is generous
 * for a loaded machine.
 */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not reached in ${ms} ms: ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
