/**
 * Polls `check` until it returns a truthy value, which it resolves to, or fails after `timeoutMs`
 * naming what it waited for. No side effects at import, so any test file or harness can use it.
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 20_000,
  everyMs = 20,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
