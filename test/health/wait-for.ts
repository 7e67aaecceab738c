/** Polls `condition` until true; generous deadline because the test machine is shared and slow. */
export async function waitFor(
  condition: () => boolean,
  what: string,
  deadlineMillis = 15_000,
): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > deadlineMillis)
      throw new Error(`timed out after ${deadlineMillis} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
